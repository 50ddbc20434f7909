#!/usr/bin/env bash
# Whole-process time of cbi-filter with no schedule flags against the same
# OpenCV calls in one process (apps/bench/opencv_passes.cpp), on a 4096^2
# RGB PNG made from a sample photo: five passes of each filter, CPU,
# THREADS threads each; median of RUNS runs; the outputs compared. Then
# cbi-filter --schedule auto: its first run (empty tuning cache) and a
# warm run, median of RUNS each. Then one pass of three pipelines (the
# gray pipeline, apps/bench/pipelines/dog.json and unsharp.json), the same
# way, without auto.
#   apps/bench/cpu_vs_opencv.sh [BUILD_DIR (build)] [THREADS (2)] [RUNS (3)]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build} threads=${2:-2} runs=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -O2 -std=c++17 apps/bench/opencv_passes.cpp -o "$work/opencv_passes" $(pkg-config --cflags --libs opencv4)
# make PHOTO OUT: a real photo upscaled to 4096x4096 (bicubic), as PNG;
# make A B: the largest difference between two images.
cat > "$work/make.cpp" <<'CPP'
#include <cstdio>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
int main(int argc, char** argv) {
    cv::Mat m = cv::imread(argv[1], cv::IMREAD_UNCHANGED), big;
    if (argc == 4) return std::printf("%g\n", cv::norm(m, cv::imread(argv[2], cv::IMREAD_UNCHANGED), cv::NORM_INF)) < 0;
    cv::resize(m, big, {4096, 4096}, 0, 0, cv::INTER_CUBIC);
    return cv::imwrite(argv[2], big) ? 0 : 1;
}
CPP
g++ -O2 -std=c++17 "$work/make.cpp" -o "$work/make" $(pkg-config --cflags --libs opencv4)
"$work/make" samples/butterfly.jpg "$work/in.png"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_cmd() {  # seconds of one whole process
  local t0 t1
  t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
echo "$(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); 4096x4096 RGB PNG, 5 passes, $threads threads, median of $runs"
printf '%-10s %10s %10s %8s %9s %12s %11s  %s\n' filter opencv_s cbi_s ratio max_diff auto_first_s auto_warm_s "cbi's schedule"
for op in blur gaussian sobelx sepia; do
  case $op in
    blur) flags=(--blur 9 --blur 9 --blur 9 --blur 9 --blur 9) ;;
    gaussian) flags=(--gaussian 9 --gaussian 9 --gaussian 9 --gaussian 9 --gaussian 9) ;;
    sobelx) flags=(--sobel x --sobel x --sobel x --sobel x --sobel x) ;;
    sepia) flags=(--color sepia --color sepia --color sepia --color sepia --color sepia) ;;
  esac
  o=() c=() a1=() a2=()
  auto=("$build/cbi-filter" "$work/in.png" "${flags[@]}" --device cpu --threads "$threads" --schedule auto
        --tuning-cache "$work/tuning.json" -o "$work/auto.png")
  for _ in $(seq "$runs"); do
    o+=("$(time_cmd "$work/opencv_passes" "$work/in.png" "$work/ocv.png" "$op" 5 "$threads")")
    c+=("$(time_cmd "$build/cbi-filter" "$work/in.png" "${flags[@]}" --device cpu --threads "$threads" -o "$work/cbi.png")")
    rm -f "$work/tuning.json"
    a1+=("$(time_cmd "${auto[@]}")")
    a2+=("$(time_cmd "${auto[@]}")")
  done
  om=$(printf '%s\n' "${o[@]}" | median) cm=$(printf '%s\n' "${c[@]}" | median)
  a1m=$(printf '%s\n' "${a1[@]}" | median) a2m=$(printf '%s\n' "${a2[@]}" | median)
  choice=$("$build/cbi-filter" "$work/in.png" "${flags[@]:0:2}" --device cpu --print-pipeline | sed -n 2p | sed 's/.*@\([^ ]*\).*/\1/')
  diff=$("$work/make" "$work/ocv.png" "$work/cbi.png" compare)
  printf '%-10s %10.3f %10.3f %8.2f %9s %12.3f %11.3f  %s\n' "$op" "$om" "$cm" "$(echo "$cm / $om" | bc -l)" "$diff" \
    "$a1m" "$a2m" "$choice"
done
printf '%-10s %10s %10s %8s %9s\n' pipeline opencv_s cbi_s ratio max_diff
for op in gray dog unsharp; do
  case $op in
    gray) flags=(--pipeline "color:gray | gaussian:5 | sobel:mag") ;;
    *) flags=(--pipeline-file "apps/bench/pipelines/$op.json") ;;
  esac
  o=() c=()
  for _ in $(seq "$runs"); do
    o+=("$(time_cmd "$work/opencv_passes" "$work/in.png" "$work/ocv.png" "$op" 1 "$threads")")
    c+=("$(time_cmd "$build/cbi-filter" "$work/in.png" "${flags[@]}" --device cpu --threads "$threads" -o "$work/cbi.png")")
  done
  om=$(printf '%s\n' "${o[@]}" | median) cm=$(printf '%s\n' "${c[@]}" | median)
  diff=$("$work/make" "$work/ocv.png" "$work/cbi.png" compare)
  printf '%-10s %10.3f %10.3f %8.2f %9s\n' "$op" "$om" "$cm" "$(echo "$cm / $om" | bc -l)" "$diff"
done
