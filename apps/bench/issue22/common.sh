# Sourced from the repository root by this folder's call scripts (the GPU
# host): unpacks bundle/ into $u, points the loader at it and at the host's
# CUDA toolkit, makes CBI_IMAGES (default 1600) generated 2048x2048 JPEGs
# (q90) in $dir/in, and starts sampling the GPUs' utilisation each second.
# (Factored out of the three scripts after the calls; the commands they run
# are the same.)
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
       OMPI_MCA_btl_vader_single_copy_mechanism=none
u=/tmp/cbi-bundle; rm -rf $u && mkdir -p $u && tar -C $u -xJf bundle/libs.tar.xz && tar -C $u -xJf bundle/bin.tar.xz || exit 1
cuda_lib=$(dirname "$(find /usr/local/cuda/ /usr/local/cuda/targets/ -maxdepth 3 -name 'libcublas.so.*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$u/lib:$cuda_lib
nvidia-smi --query-gpu=index,name --format=csv,noheader
dir=/tmp/cbi-issue22; rm -rf $dir; mkdir -p $dir/in
python3 - $dir/in ${CBI_IMAGES:-1600} <<'PY'
import sys
from multiprocessing import Pool
import numpy as np, cv2
out, n, w, h = sys.argv[1], int(sys.argv[2]), 2048, 2048
x, y = np.meshgrid(np.arange(w), np.arange(h))
base = np.dstack([x * 255 // w, y * 255 // h, (x + y) * 127 // (w + h)]).astype(np.int32)
def make(i):
    noise = np.clip(np.rint(np.random.default_rng(i).normal(0, 12, base.shape)), 0, 255).astype(np.int32)
    assert cv2.imwrite(f"{out}/img{i:04d}.jpg", np.clip(base + noise, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])
with Pool() as p:
    p.map(make, range(n))
PY
n=$(ls $dir/in | wc -l); echo "$n JPEGs, $(du -sh $dir/in | cut -f1), $(nproc) cores"

# run LABEL CMD...: the whole process's seconds and images/s, its CPU time
# (user + system, children included) in cores, the batch line of each rank
# and the devices' lines of --stats.
run() {
  local label=$1; shift
  local TIMEFORMAT="%R %U %S" real user sys
  echo "== $(date +%T) $label"
  rm -rf $dir/o
  { time "$@" > /tmp/run.out 2> /tmp/run.err; } 2> /tmp/run.time
  read -r real user sys < /tmp/run.time
  awk -v l="$label" -v r="$real" -v u="$user" -v s="$sys" -v n="$n" -v b="$(grep -oE 'wall [0-9.]+ s, [0-9]+ processed, [0-9.]+ images/s' /tmp/run.out | tr '\n' ';')" \
      -v d="$(grep -E '^(device|read|process|encode|jpeg)' /tmp/run.out | tr -s ' ' | tr '\n' ';')" \
      'BEGIN { printf "%-22s whole %.2f s = %6.1f images/s; CPU %.1f cores; batch: %s %s\n", l, r, n / r, (u + s) / r, b, d }'
  grep -iE 'error|fail' /tmp/run.err | head -2
}

nvidia-smi dmon -s u -o T > /tmp/dmon.txt 2>&1 &
dmon=$!
# finish: stops the sampling, prints it (SM and JPEG engine %, both GPUs a line), removes the images.
finish() {
  kill $dmon
  echo "utilisation each second (nvidia-smi dmon -s u):"
  grep -v '^#' /tmp/dmon.txt | awk '{ printf "%s gpu%s sm %s jpg %s%s", $1, $2, $3, $7, ($2 == 1 ? "\n" : " | ") }'
  rm -rf $dir
}
