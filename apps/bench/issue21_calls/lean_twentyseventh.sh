#!/usr/bin/env bash
# Twenty-seventh session, call 9: call 8 found call 7's edge warps slow to
# start (their set-up computed each byte's source through an out-of-line
# call, dividing by a run-time channel count, into local memory): lean
# (bundle-extra/lean.tar.xz, cbi-bench only) computes the sources inline
# with the channels a constant and stores none. New (the bundle) against
# lean, the pair pipelines, in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new lean.tar.xz
d=$OUT/lean; mkdir -p $d
pairs_in_turn $d new lean
