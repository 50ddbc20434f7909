#!/usr/bin/env bash
# Nineteenth session, call 6 (H100): the final code (single stencils choose
# their strip height from 8 and 12, blends from 8 to 24, pairs from 12 to
# 24): singles_waves.sh, then final_nineteenth.sh, each writing its data
# under its own folder of $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
top=$OUT
mkdir -p $top/singles $top/final
OUT=$top/singles bash apps/bench/issue21_calls/singles_waves.sh
OUT=$top/final bash apps/bench/issue21_calls/final_nineteenth.sh
