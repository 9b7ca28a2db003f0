#!/bin/sh
# Regenerate the bench/results.md sections of the probe and scoring benches in one go.
# Each bench measures its baseline in the same run, as whole operations, and rewrites
# only its own section. Usage: bench/run_all.sh [RUNS]   (from anywhere; needs xxhsum,
# apt package xxhash, and a machine where the local provider runs)
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
runs=${1:-7}
cd "$here"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
"$python" bench_incremental.py --runs "$runs" --write results.md
"$python" bench_probe.py --runs "$runs" --write results.md
"$python" bench_score.py --concurrency 1 4 16 32 --repeats 3 --write
