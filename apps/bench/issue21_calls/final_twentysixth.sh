#!/usr/bin/env bash
# Twenty-sixth session, final call: the full bundle of the final code. Every
# GPU suite and the fusion sanitizers; the issue's pipelines; a user's
# unsharp mask. (The final kernels against the previous session's: call 7,
# caps_twentysixth.sh, whose cap88 column is the final unsharp kernel and
# whose new column the final difference of Gaussians.)
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
gpu_suites
issue_pipes "$OUT"
. apps/bench/issue21_calls/user_unsharp_twentysixth.sh
