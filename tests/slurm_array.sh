#!/usr/bin/env bash
# Runs samples/slurm/cbi-array.sbatch the way Slurm runs its array tasks
# (SLURM_ARRAY_* set, cbi-filter on PATH), all 8 tasks one after another, on
# a generated folder: each task must say which shard it took, and together
# they must write exactly what one plain cbi-filter run writes.
#   tests/slurm_array.sh BIN_DIR SBATCH_SCRIPT SAMPLES_DIR
set -euo pipefail
bin_dir=$1 script=$2 samples=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/in/a" "$work/in/b/c"
n=0
for copy in 1 2 3 4; do
  for f in "$samples"/*.jpg "$samples"/*.png; do
    dir=$([ $((n % 3)) = 0 ] && echo a || echo b/c)
    cp "$f" "$work/in/$dir/photo$n.${f##*.}"
    n=$((n + 1))
  done
done
for task in 0 1 2 3 4 5 6 7; do
  SLURM_ARRAY_TASK_ID=$task SLURM_ARRAY_TASK_COUNT=8 SLURM_ARRAY_TASK_MIN=0 SLURM_CPUS_PER_TASK=2 \
    PATH="$bin_dir:$PATH" bash "$script" "$work/in" "$work/parts" 2>"$work/err$task"
  grep -q "notice: shard $task/8 of the inputs, from SLURM_ARRAY_TASK_ID=$task" "$work/err$task" ||
    { echo "task $task did not report its shard:"; cat "$work/err$task"; exit 1; }
done
"$bin_dir/cbi-filter" --input-dir "$work/in" --output-dir "$work/all" --recursive --blur 9 --quiet 2>/dev/null
count=$(find "$work/all" -type f | wc -l)
[ "$count" -eq "$n" ] || { echo "one run wrote $count of $n outputs"; exit 1; }
diff -r "$work/all" "$work/parts"
echo "8 array tasks wrote the $n outputs of one run, byte for byte"
