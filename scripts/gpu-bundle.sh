#!/usr/bin/env bash
# Builds cbi here with nvcc for the GPU host's architecture and stages a
# self-contained bundle in bundle/ that runs on a machine with the CUDA
# driver but without OpenCV, TBB or GTest: the binaries, their non-system
# shared libraries (xz-compressed: OpenCV's imgcodecs pulls in ~175 MB of
# GDAL & co.), the samples and run.sh. See docs/testing-gpu.md.
#   scripts/gpu-bundle.sh            # then, on the GPU host: bundle/run.sh all
# CBI_BUILD_DIR / CBI_BUNDLE_DIR choose other folders (default build-gpu, bundle).
# CBI_BUNDLE_BINARIES="test_fusion cbi-bench" bundles those binaries only, with
# only the libraries they load: a device call carries 64 MiB with the working
# tree, and every binary links all the kernels (test_fusion and cbi-bench load
# 17 libraries, 7 MB compressed; cbi-filter and test_filters_cuda also load
# OpenCV's imgcodecs and its GDAL & co., 47 MB).
# CBI_CUDA_ARCH (default 90-real: machine code for the H100/H200 host, no PTX,
# which would add its size again to every binary).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
arch=${CBI_CUDA_ARCH:-90-real}
build=${CBI_BUILD_DIR:-build-gpu}
out=${CBI_BUNDLE_DIR:-bundle}
export PATH=$PATH:/usr/local/cuda/bin

# cbi-filter links Debian's Open MPI 4.1 (libmpi.so.40) but the MPI libraries
# stay out of the bundle: the GPU host's Open MPI 4.1.6 has the same ABI, and
# its mpirun must meet its own libraries. CBI_WITH_MPI=OFF leaves MPI out.
# nvJPEG: the development machines' CUDA toolkit lacks it. CBI_NVJPEG_ROOT
# names a folder with include/nvjpeg.h and lib64/libnvjpeg.so* copied from the
# GPU host (docs/testing-gpu.md); the library stays out of the
# bundle (the host's toolkit has it).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCBI_WITH_CUDA=ON -DCBI_WITH_MPI="${CBI_WITH_MPI:-AUTO}" \
  -DCBI_NVJPEG_ROOT="${CBI_NVJPEG_ROOT:-}" -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
targets=(cbi-filter cbi-bench test_filters_cuda test_cuda_errors test_cuda_wait test_filters_cpu test_schedules test_graph test_tuning
         test_fusion test_defaults test_devices)
[[ $(cmake --build "$build" --target help) == *test_jpeg_gpu* ]] && targets+=(test_jpeg_gpu cbi-codec-bench)
[ -n "${CBI_BUNDLE_BINARIES:-}" ] && read -r -a targets <<< "$CBI_BUNDLE_BINARIES"
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

# CBI_BUNDLE_CPU_SUITES=0 leaves out the suites that test only the CPU (CI
# runs them), when the bundle must fit the 64 MiB a device call carries.
binaries=()
for b in cbi-filter cbi-bench cbi-codec-bench cbi-chain-bench; do [[ " ${targets[*]} " == *" $b "* ]] && [ -x "$build/$b" ] && binaries+=("$build/$b"); done
for t in "${targets[@]}"; do
  [ "${CBI_BUNDLE_CPU_SUITES:-1}" = 0 ] && [[ " test_filters_cpu test_schedules test_graph " == *" $t "* ]] && continue
  [ -x "$build/tests/$t" ] && binaries+=("$build/tests/$t")
done
rm -rf "$out" && mkdir -p "$out/samples/pipelines" "$out/bench"
# The binaries travel xz-compressed too: the device tool carries 64 MiB at most.
stage_bin=$(mktemp -d)
mkdir "$stage_bin/bin"
cp "${binaries[@]}" "$stage_bin/bin/"
strip "$stage_bin"/bin/*
tar -C "$stage_bin" -cf - bin | xz -T1 -9 > "$out/bin.tar.xz"  # one 64 MiB window: the binaries share libcbi, so they compress together
rm -rf "$stage_bin"
cp samples/*.jpg samples/*.png "$out/samples/"
cp samples/pipelines/*.json "$out/samples/pipelines/"
# The benchmark peers are built or run there (NPP exists only on the GPU host).
cp apps/bench/npp_peer.cu apps/bench/cupy_peer.py apps/bench/plot.py "$out/bench/"

# Non-system libraries: everything ldd resolves except glibc, libstdc++,
# libgcc, the CUDA driver, cuBLAS (hundreds of MB) and Open MPI with the
# libraries only it uses, which the GPU host provides.
libs=$(ldd "${binaries[@]}" | awk '/=> \// {print $3}' |
       grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libnvjpeg)\.so' |
       grep -v -E '/(libmpi|libmpi_cxx|libopen-pal|libopen-rte|libhwloc|libevent_core-2\.1|libevent_pthreads-2\.1)\.so' | sort -u)
key=$(for l in $libs; do sha256sum "$l"; done | sha256sum | cut -c1-16)
mkdir -p bundle-cache
if [ ! -f "bundle-cache/libs-$key.tar.xz" ]; then
  stage=$(mktemp -d)
  mkdir "$stage/lib"
  for l in $libs; do cp -L "$l" "$stage/lib/"; done
  tar -C "$stage" -cf - lib | xz -T0 -9 > "bundle-cache/libs-$key.tar.xz.part"
  mv "bundle-cache/libs-$key.tar.xz.part" "bundle-cache/libs-$key.tar.xz"
  rm -rf "$stage"
fi
cp "bundle-cache/libs-$key.tar.xz" "$out/libs.tar.xz"
cp scripts/gpu-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
du -sh "$out" | sed 's/^/bundle size: /'
