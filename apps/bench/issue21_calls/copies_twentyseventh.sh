#!/usr/bin/env bash
# Twenty-seventh session, call 6: call 5's Nsight Compute counts showed its
# shuffle copies raising the row loop's register pressure in every warp
# (the store's 8 bounds checks recomputed each row). Two builds that hold
# fewer registers in the copy (bundle-extra/two.tar.xz): shflseq (the
# shuffles a part at a time, the lane's copy read in two halves) and
# smemrow (the warp's row through shared memory again, each lane's two
# source words read with two 8-byte loads). SASS counts of the pair
# kernels, then new (the bundle) and both as call 4 timed them, in turn,
# twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new two.tar.xz
sass_pairs new shflseq smemrow
d=$OUT/copies; mkdir -p $d
pairs_in_turn $d new shflseq smemrow
python3 apps/bench/issue21_calls/pair_table.py $d new smemrow
