#!/usr/bin/env bash
# Twenty-sixth session, call 7: the blend kernel's register cap (blends of
# 9x9 Gaussians on 3 channels) at 72, 80 (new: the bundle), 88 and none
# (cap72, cap88, nocap: cuda_blend.cu alone rebuilt with the cap changed in
# cuda_stream8.cuh, relinked), and the previous session's kernel (base,
# 96a8408), in turn on the blends (blends_in_turn), bundle-extra/vars.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new vars.tar.xz
blends_in_turn "$OUT" 400 base new cap72 cap88 nocap
(cd "$OUT" && tar -cJf csv.tar.xz *.csv && rm -f *.csv)
