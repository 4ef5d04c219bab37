#!/bin/bash
# same_outputs.sh APP_DIR OUT_DIR [INPUT...]: `breakwater simulate --json` of every input with the
# heuristic counter, then the default counter on an empty count store and again on the store the first
# run filled: stdout, stderr and exit code per run, one file each. Run it for two trees (APP_DIR: the
# tree's `app` folder, put first on PYTHONPATH) and `diff -r` the two OUT_DIRs: a change that must not
# move a figure (issue 38) leaves them identical. Without inputs: every fixture (tests/fixtures,
# /work/shared/fixtures/real, sample_sessions) and the bench inputs in $BENCH_INPUTS (a folder).
set -u
APP=$(realpath "$1"); OUT=$2; shift 2
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then files="$*"; else
  files="$(find tests/fixtures /work/shared/fixtures/real sample_sessions -type f \( -name '*.jsonl' -o -name '*.json' -o -name '*.traj' \) | sort)"
  [ -n "${BENCH_INPUTS:-}" ] && files="$files $(ls "$BENCH_INPUTS"/* | sort)"
fi
i=0
for f in $files; do
  i=$((i+1)); name=$(echo "$f" | tr '/' '_')
  store=$(mktemp -d)
  for run in heur cold warm; do
    args=(); [ $run = heur ] && args=(--counter heuristic)
    PYTHONPATH=$APP BREAKWATER_CACHE_DIR=$store .venv/bin/python -m breakwater simulate "$f" --json "${args[@]}" \
      >"$OUT/$name.$run" 2>"$OUT/$name.$run.err"
    echo "rc=$?" >>"$OUT/$name.$run"
  done
  rm -rf "$store"
done
echo "$i inputs"
