#!/usr/bin/env bash
# Builds cbi here with nvcc for the GPU host's architecture and stages a
# self-contained bundle in bundle/ that runs on a machine with the CUDA
# driver but without OpenCV, TBB or GTest: the binaries, their non-system
# shared libraries (xz-compressed: OpenCV's imgcodecs pulls in ~175 MB of
# GDAL & co.), the samples and run.sh. See README "Testing on a GPU host".
#   scripts/gpu-bundle.sh            # then, on the GPU host: bundle/run.sh all
# CBI_BUILD_DIR / CBI_BUNDLE_DIR choose other folders (default build-gpu, bundle).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
arch=${CBI_CUDA_ARCH:-90}
build=${CBI_BUILD_DIR:-build-gpu}
out=${CBI_BUNDLE_DIR:-bundle}
export PATH=$PATH:/usr/local/cuda/bin

# Without MPI: Debian's Open MPI libraries would not match the GPU host's
# mpirun (README: Scaling out).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCBI_WITH_CUDA=ON -DCBI_WITH_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build "$build" -j"$(nproc)" --target cbi-filter cbi-bench test_filters_cuda test_cuda_errors test_filters_cpu test_schedules test_graph test_tuning test_fusion test_defaults

binaries=("$build/cbi-filter" "$build/cbi-bench" "$build/tests/test_filters_cuda" "$build/tests/test_cuda_errors"
          "$build/tests/test_filters_cpu" "$build/tests/test_schedules" "$build/tests/test_graph"
          "$build/tests/test_tuning" "$build/tests/test_fusion" "$build/tests/test_defaults")
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
# libgcc, the CUDA driver and cuBLAS (hundreds of MB), which the GPU host provides.
libs=$(ldd "${binaries[@]}" | awk '/=> \// {print $3}' |
       grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt)\.so' | sort -u)
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
