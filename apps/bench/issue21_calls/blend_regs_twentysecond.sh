#!/usr/bin/env bash
# Twenty-second session, call 1: the fused blend kernel (stream8_stencil on
# BlendedStencils) with a register cap of 80 or 72 (r80, r72), with a
# cheaper finish (fin: the source byte as float by one permute, the
# Gaussian's result without a mask), and both (fin80), against base (the
# bundle's cbi-bench, 63cb9e5), in turn, twice; Nsight Compute on base and
# fin80. Each variant replaces only filters/cuda_blend.cu's object
# (-DCBI_STREAM8_BLEND_REGS=N); all five as NAME/bin/cbi-bench in
# bundle-extra/blends-bins.tar.xz (one solid archive: they differ in one object).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/call1; mkdir -p $d
tar -C /tmp -xJf bundle-extra/blends-bins.tar.xz
blends_in_turn $d 300 base r80 r72 fin fin80
for b in base fin80; do
  ncu_blend /tmp/$b/bin/cbi-bench apps/bench/pipelines/unsharp.json 4096x4096 $d/ncu-$b-unsharp.txt
  ncu_blend /tmp/$b/bin/cbi-bench apps/bench/pipelines/dog.json 4096x4096 $d/ncu-$b-dog.txt
done
tar -C $d -cJf $OUT/call1.tar.xz .
