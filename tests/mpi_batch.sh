#!/usr/bin/env bash
# cbi-filter under mpirun on this machine (oversubscribed: more ranks than
# cores), against one plain process on the same generated folder:
#   1. mpirun -n 3 writes byte-identical outputs, prints one summary line
#      (rank 0's, counting every rank's files) and exits 0 on every rank;
#      with --stats, rank 0 prints every rank's block;
#   2. a folder with a broken file: exit 1, one error line for it;
#   3. one rank killed with SIGKILL mid-run: every output on disk is complete
#      (equal to the plain run's), and a rerun with --skip-existing
#      completes the job.
#   tests/mpi_batch.sh CBI_FILTER SAMPLES_DIR
set -euo pipefail
bin=$1 samples=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Shared memory between the ranks, without the cross-process copies that containers forbid.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi() { mpirun -n "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

# 36 photos of different sizes in two folders.
mkdir -p "$work/in/a" "$work/in/b"
n=0
for scale in 1 2 3; do
  for f in "$samples"/*.jpg "$samples"/*.png; do
    for copy in 1 2 3 4; do
      dir=$([ $((n % 2)) = 0 ] && echo a || echo b)
      "$bin" "$f" --blur 1 --device cpu -o "$work/in/$dir/p$n.${f##*.}" 2>/dev/null
      n=$((n + 1))
    done
  done
done
filters=(--blur 9 --gaussian 5 --device cpu --jobs 1)
"$bin" --input-dir "$work/in" --output-dir "$work/one" --recursive "${filters[@]}" --quiet

# 1. Three ranks, with --stats.
mpi 3 "$bin" --input-dir "$work/in" --output-dir "$work/three" --recursive "${filters[@]}" --stats >"$work/out" 2>"$work/err" ||
  { cat "$work/err"; fail "mpirun -n 3 exited $?"; }
diff -r "$work/one" "$work/three" || fail "3 ranks wrote other outputs than one process"
[ "$(grep -c 'files:' "$work/err")" = 1 ] || { cat "$work/err"; fail "not exactly one summary line"; }
grep -q "^cbi-filter: $n files: $n processed, 0 failed" "$work/err" || { cat "$work/err"; fail "the summary does not count every rank's files"; }
echo "ok: mpirun -n 3 wrote the $n outputs of one process, one summary line"
# --stats: rank 0 prints a block per rank, whose counts add up to every file.
for r in 0 1 2; do grep -qx "rank $r of 3:" "$work/out" || { cat "$work/out"; fail "--stats has no block for rank $r"; }; done
[ "$(grep -c '^device cpu: ' "$work/out")" = 3 ] || { cat "$work/out"; fail "--stats: not one device line per rank"; }
counted=$(grep -oE '^wall [0-9.]+ s, [0-9]+ processed' "$work/out" | awk '{ s += $4 } END { print s }')
[ "$counted" = "$n" ] || { cat "$work/out"; fail "--stats: the ranks' blocks count $counted files, not $n"; }
echo "ok: --stats under mpirun -n 3: one block per rank, $n files in all"

# 2. A broken file: the same exit code on every rank, one line for the file.
mkdir -p "$work/bad"
cp -r "$work/in/a" "$work/bad/"
head -c 300 "$samples/butterfly.jpg" >"$work/bad/a/broken.jpg"
rc=0
mpi 3 "$bin" --input-dir "$work/bad" --output-dir "$work/badout" --recursive "${filters[@]}" --quiet 2>"$work/err" || rc=$?
[ "$rc" = 1 ] || { cat "$work/err"; fail "a broken file: mpirun exited $rc, not 1"; }
[ "$(grep -c 'broken.jpg' "$work/err")" = 1 ] || { cat "$work/err"; fail "not exactly one error line for the broken file"; }
echo "ok: a broken file fails the job with exit 1 and one error line"

# 3. SIGKILL one rank mid-run, then resume.
big=(--gaussian 31 --blur 31 --device cpu --jobs 1)
mpi 3 "$bin" --input-dir "$work/in" --output-dir "$work/killed" --recursive "${big[@]}" --quiet 2>"$work/err" &
launcher=$!
victim=""
for _ in $(seq 1 600); do
  for pid in $(pgrep -f "output-dir $work/killed" || true); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$pid; fi
  done
  [ -n "$victim" ] && [ "$(find "$work/killed" -type f -not -name '.cbi-tmp-*' 2>/dev/null | wc -l)" -ge 3 ] && break
  sleep 0.05
done
[ -n "$victim" ] || fail "rank 1 not found"
kill -KILL "$victim"
rc=0
wait "$launcher" || rc=$?
[ "$rc" != 0 ] || fail "the job ended 0 although a rank was killed"
done_before=$(find "$work/killed" -type f -not -name '.cbi-tmp-*' | wc -l)
[ "$done_before" -lt "$n" ] || echo "note: every output was written before the kill took effect"
"$bin" --input-dir "$work/in" --output-dir "$work/one-big" --recursive "${big[@]}" --quiet
for f in $(cd "$work/killed" && find . -type f -not -name '.cbi-tmp-*'); do
  cmp -s "$work/killed/$f" "$work/one-big/$f" || fail "$f is not complete after the kill"
done
mpi 2 "$bin" --input-dir "$work/in" --output-dir "$work/killed" --recursive "${big[@]}" --quiet --skip-existing ||
  fail "the rerun with --skip-existing exited $?"
[ -z "$(find "$work/killed" -name '.cbi-tmp-*')" ] || fail "temporaries left after the rerun"
diff -r "$work/one-big" "$work/killed" || fail "the rerun did not complete the job"
echo "ok: killing a rank after $done_before of $n outputs left only complete files; the rerun completed the job"
