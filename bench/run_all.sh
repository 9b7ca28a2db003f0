#!/bin/sh
# Regenerate bench/results.md in one command: every bench that owns a section rewrites only
# that section, measuring its baselines in the same run, as whole operations, interleaved
# (bench/_timing.py). Usage (from anywhere):
#
#   bench/run_all.sh [RUNS] [BENCH ...]
#
# RUNS (default 7) is the number of interleaved rounds of each bench; BENCH names pick a
# subset (default: all but ray-suite): incremental probe score build fork rows pool office
# env a11y ray eval-commit; ray-suite (the whole suite through Ray against a local run, ~30 min on 2
# cores) runs only when named.
# Needs xxhsum (apt package xxhash) and a machine where the local provider runs; rows and
# a11y also run on docker when its engine answers (eval-commit only there). CHECK_RUNS=0 skips the whole-suite
# `osguard check` timings of the build bench (minutes of CPU; never on a shared machine).
# The "environments (docker)" image-build table and the "view" section are written by hand
# from bench_docker.py and bench_view.py (their commands are in those sections).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
runs=${1:-7}
[ $# -gt 0 ] && shift
benches=${*:-incremental probe score build fork rows pool office env a11y ray eval-commit}
cd "$here"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
docker_up() { docker info >/dev/null 2>&1; }
for bench in $benches; do
    echo "== $bench (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    case $bench in
        incremental) "$python" bench_incremental.py --runs "$runs" --write results.md ;;
        probe) "$python" bench_probe.py --runs "$runs" --write results.md ;;
        score) "$python" bench_score.py --concurrency 1 4 16 32 --repeats "$runs" --write || true ;;
        build) "$python" bench_build.py --runs "$runs" --check-runs "${CHECK_RUNS:-1}" --write results.md ;;
        fork) "$python" bench_fork.py --runs "$runs" --write results.md ;;
        rows) "$python" bench_rows.py --provider local --runs "$runs" --write results.md
              if docker_up; then "$python" bench_rows.py --provider docker --runs "$runs" --write results.md; fi ;;
        pool) "$python" bench_pool.py --provider local --runs "$runs" --cpu 3 --write results.md
              if docker_up; then "$python" bench_pool.py --provider docker --runs "$runs" --cpu 3 --write results.md; fi ;;
        office) "$python" bench_office.py --runs "$runs" --write results.md ;;
        env) "$python" bench_env.py --write results.md ;;
        a11y) "$python" bench_a11y.py --write results.md
              if docker_up; then "$python" bench_a11y.py --provider docker --write results.md; fi ;;
        ray) "$python" bench_ray.py --repeats "$runs" --write ;;
        eval-commit) if docker_up; then "$python" bench_eval_commit.py --runs "$runs" --write results.md; fi ;;
        ray-suite) "$python" ray_suite.py --write || true ;;  # its section lists any differing episode
        *) echo "unknown bench: $bench (expected: incremental probe score build fork rows pool office env a11y ray eval-commit ray-suite)" >&2
           exit 2 ;;
    esac
done
