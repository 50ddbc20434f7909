#!/usr/bin/env bash
# Stages what the GPU host needs to build and test the Python module there
# (its Python 3.12, pybind11 3.1 and NumPy 2 differ from this machine's, so
# the extension is compiled there; it has no OpenCV C++ or TBB, so the cbi
# layers are built here, with CUDA for sm_90, and carried):
#   bundle-py/cbi-layers.tar.xz  the static cbi layers (position-independent),
#                                the OpenCV headers _core.cpp includes, and the
#                                shared libraries the extension loads (not
#                                CUDA's: the host's toolkit has them)
#   bundle-py/build.sh           run there: compiles python/_core.cpp into
#                                bundle-py/python/cbi with the host's Python
#
#   python/gpu-bundle.sh                   # here (CUDA build in build-gpu-py, a while on 2 cores)
#   bundle-py/build.sh && bundle-py/test.sh   # there, from the repository root (GPU tests: -m gpu)
#
# CBI_BUILD_DIR (default build-gpu-py), CBI_BUNDLE_DIR (bundle-py),
# CBI_CUDA_ARCH (90-real), CBI_WITH_CUDA (ON; OFF stages a CPU-only bundle,
# to try build.sh here), CBI_JOBS (2).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${CBI_BUILD_DIR:-build-gpu-py}
out=${CBI_BUNDLE_DIR:-bundle-py}
export PATH=$PATH:/usr/local/cuda/bin
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCBI_WITH_CUDA="${CBI_WITH_CUDA:-ON}" -DCBI_WITH_MPI=OFF \
    -DCBI_WITH_PYTHON=ON -DBUILD_TESTING=OFF -DCMAKE_CUDA_ARCHITECTURES="${CBI_CUDA_ARCH:-90-real}" >/dev/null
fi
cmake --build "$build" -j"${CBI_JOBS:-2}" --target cbi_python
module=$(ls "$build"/python/cbi/_core*.so)
link="$build/python/CMakeFiles/cbi_python.dir/link.txt"
flags="$build/python/CMakeFiles/cbi_python.dir/flags.make"

rm -rf "$out"
stage=$(mktemp -d)
mkdir -p "$stage/static" "$stage/lib" "$stage/include" "$out/python/cbi"
archives=() shared=() links=()
for tok in $(cat "$link"); do
  case "$tok" in
    *.a) f=$(cd "$build/python" && realpath "$tok"); cp "$f" "$stage/static/"; archives+=("\$B/static/$(basename "$f")") ;;
    */libcudart*|*/libnvjpeg*) shared+=("\$CUDA/lib64/$(basename "$tok" | sed 's/\.so.*/.so/')") ;;
    /*.so|/*.so.*)
      soname=$(objdump -p "$tok" | awk '/SONAME/ {print $2}')
      links+=("$(basename "$tok"):${soname:-$(basename "$tok")}")
      shared+=("\$B/lib/$(basename "$tok")") ;;
  esac
done
# Run-time closure of the extension, as scripts/gpu-bundle.sh takes it (the host has
# the CUDA libraries and Open MPI).
for l in $(ldd "$module" | awk '/=> \// {print $3}' |
           grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnvjpeg)\.so' |
           grep -v -E '/(libmpi|libmpi_cxx|libopen-pal|libopen-rte|libhwloc|libevent_core-2\.1|libevent_pthreads-2\.1)\.so' |
           sort -u); do
  cp -L "$l" "$stage/lib/"
done
# The headers _core.cpp reaches outside the repository, the compiler and CUDA: OpenCV's (and TBB's if any).
defines=$(sed -n 's/^CXX_DEFINES = //p' "$flags" | tr ' ' '\n' | { grep -v '_EXPORTS$' || true; } | tr '\n' ' ')
c++ -std=c++20 -M $defines -I. -isystem /usr/include/opencv4 $(python3-config --includes 2>/dev/null || echo -I/usr/include/python3.11) \
  -I/usr/local/cuda/include python/_core.cpp 2>/dev/null | tr ' \\' '\n\n' |
  grep -E '^/usr/include/(opencv4|oneapi|tbb)/' | sort -u | while read -r h; do
    mkdir -p "$stage/include/$(dirname "${h#/usr/include/}")"
    cp "$h" "$stage/include/${h#/usr/include/}"
  done
tar -C "$stage" -cf - static lib include | xz -T1 -9 > "$out/cbi-layers.tar.xz"
rm -rf "$stage"

cat > "$out/build.sh" <<EOF
#!/usr/bin/env bash
# On the GPU host, from the repository root: compiles python/_core.cpp into
# \$B/python/cbi for \$PYTHON (default /opt/torch/.venv/bin/python, which has
# pybind11 3.1), against the layers built on the development machine.
set -euo pipefail
B=\$(cd "\$(dirname "\$0")" && pwd)
PYTHON=\${PYTHON:-/opt/torch/.venv/bin/python}
CUDA=\${CUDA_HOME:-/usr/local/cuda}
[ -d "\$B/static" ] || tar -C "\$B" -xJf "\$B/cbi-layers.tar.xz"
for pair in ${links[*]}; do
  [ -e "\$B/lib/\${pair%%:*}" ] || ln -s "\${pair#*:}" "\$B/lib/\${pair%%:*}"
done
suffix=\$("\$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# pybind11's headers: its Python package's, else the system's (pybind11-dev) next to Python's.
includes=\$("\$PYTHON" -m pybind11 --includes 2>/dev/null ||
           "\$PYTHON" -c 'import sysconfig; print("-I" + sysconfig.get_paths()["include"])')
c++ -O2 -std=c++20 -fPIC -shared -fvisibility=hidden $defines -I. -isystem "\$B/include/opencv4" -isystem "\$B/include" \\
  -isystem "\$CUDA/include" \$includes python/_core.cpp -o "\$B/python/cbi/_core\$suffix" \\
  ${archives[*]} ${shared[*]} -Wl,--disable-new-dtags,-rpath,'\$ORIGIN/../../lib'
cp python/cbi/*.py python/cbi/*.pyi python/cbi/py.typed "\$B/python/cbi/"
echo "built \$B/python/cbi/_core\$suffix"
EOF
cat > "$out/test.sh" <<'EOF'
#!/usr/bin/env bash
# On the GPU host, from the repository root, after build.sh: the pytest
# suites with the module just built (all of them; pass -m gpu for the GPU
# ones only, or any pytest arguments).
set -euo pipefail
B=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python}
cd python/tests
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PYTHONPATH="$B/python" exec "$PYTHON" -m pytest -q -p no:cacheprovider -rs "$@"
EOF
chmod +x "$out/build.sh" "$out/test.sh"
du -sh "$out" | sed 's/^/bundle size: /'
