#!/usr/bin/env bash
# Twenty-seventh session, call 7: the edge copies as committed (smemcopy:
# bundle-extra/smemcopy.tar.xz, cbi-bench only): the warp's row through
# shared memory as before, each lane's copy two 8-byte loads and byte
# permutes by selectors built once (chain_lane_copy, out of line), the
# byte path's offsets read in the loop. Uncapped, its pair kernels asked
# for as many registers as the bundle's (ptxas). New (the bundle) against
# smemcopy, default border and constant:0, in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new smemcopy.tar.xz
d=$OUT/smemcopy; mkdir -p $d
pairs_in_turn $d new smemcopy
