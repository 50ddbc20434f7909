#!/usr/bin/env bash
# Twenty-fifth session, calls 4 and 6 (on an H100): the last commit's code (the
# full bundle): every GPU suite (the *Cli* tests left out, as bundle/run.sh
# does: they run the build tree's cbi-filter), the fusion sanitizers, the
# issue's pipelines with their floors, a user's run.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
gpu_suites
d=/tmp/call4; mkdir -p $d
issue_pipes $d
cp $d/final-*.csv $OUT/
. apps/bench/issue21_calls/user_run.sh
