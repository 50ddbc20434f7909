# Sourced from the repository root by this folder's call scripts: unpacks
# bundle/ (its libraries, and its binaries or those of the tarball BIN names)
# into $u, and points the loader, the tests' samples and PATH at them and at
# the host's CUDA toolkit.
u=/tmp/cbi-bundle; rm -rf $u && mkdir -p $u && tar -C $u -xJf bundle/libs.tar.xz && tar -C $u -xJf "${BIN:-bundle/bin.tar.xz}"
cuda_lib=$(dirname "$(find /usr/local/cuda/ /usr/local/cuda/targets/ -maxdepth 3 -name 'libcublas.so.*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$u/lib:$cuda_lib CBI_SAMPLES_DIR=$PWD/bundle/samples PATH=$PATH:/usr/local/cuda/bin
