#!/usr/bin/env bash
# Twenty-ninth session, last call: the full bundle of the last commit's
# code (with nvJPEG): every GPU suite and the fusion sanitizers (gpu_suites),
# then the batch device rule again (batch_device_twentyninth.sh).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
gpu_suites
echo "${SECONDS}s"
SIZES="1 8 32 128" ROUNDS=1 DEVS="default cpu cuda" apps/bench/issue21_calls/batch_device_twentyninth.sh 2>&1 | tail -9
