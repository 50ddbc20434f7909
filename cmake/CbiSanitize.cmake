# Sanitizer and fuzzing builds, CPU backend only (nvcc does not take these
# flags for device code, and the GPU has compute-sanitizer instead):
#   -DCBI_SANITIZE=ON  ASan + UBSan on the library, apps and tests (gcc or clang);
#                      scripts/setup.sh test builds it in build-asan.
#   -DCBI_FUZZ=ON      libFuzzer targets in fuzz/ (clang: CC=clang-14 CXX=clang++-14);
#                      the library and everything else get coverage
#                      instrumentation plus ASan + UBSan. Built in build-fuzz.
# Both set CBI_SANITIZE_LINK_FLAGS, which the layer targets carry in their interface
# (installed package included), so an application linking the instrumented
# static libraries link the sanitizer runtimes too.
option(CBI_SANITIZE "Build the library, apps and tests with AddressSanitizer and UBSan" OFF)
option(CBI_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)

set(CBI_SANITIZE_LINK_FLAGS "")
if(CBI_SANITIZE OR CBI_FUZZ)
  if(CBI_CUDA_ENABLED)
    message(FATAL_ERROR "CBI_SANITIZE and CBI_FUZZ build the CPU backend only: add -DCBI_WITH_CUDA=OFF")
  endif()
  # -g1: line tables, so reports name file:line at little compile cost.
  # No recovery: the first report ends the process with a non-zero exit.
  set(_cbi_san -fsanitize=address,undefined)
  set(_cbi_san_compile -fno-omit-frame-pointer -fno-sanitize-recover=all -g1)
  if(CBI_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      message(FATAL_ERROR "CBI_FUZZ needs clang (libFuzzer): configure with CXX=clang++-14 "
                          "(Debian: apt-get install clang-14 libclang-rt-14-dev)")
    endif()
    # Coverage feedback for everything the targets link; the targets
    # themselves add -fsanitize=fuzzer (libFuzzer's main).
    list(APPEND _cbi_san_compile -fsanitize=fuzzer-no-link)
  endif()
  add_compile_options(${_cbi_san} ${_cbi_san_compile})
  add_link_options(${_cbi_san})
  set(CBI_SANITIZE_LINK_FLAGS ${_cbi_san})
  message(STATUS "cbi: sanitizers ${_cbi_san} ${_cbi_san_compile}")
endif()
