#!/usr/bin/env bash
# Test osguard against the newest release of every dependency (not run in CI, which tests
# the pinned versions of constraints.txt): a separate venv, .venv-latest, gets osguard with
# its dev extras and no constraints, eagerly upgraded, then the test suite runs in it.
# A failure here is an early warning that a new release (typer, click, ...) breaks osguard;
# fix it, then refresh the pins with scripts/lock.sh.
#
#   bash scripts/test-latest.sh                 # the whole suite
#   bash scripts/test-latest.sh tests/cli -x    # arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${OSGUARD_LATEST_VENV:-.venv-latest}
python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q --upgrade --upgrade-strategy eager -e ".[dev]"
"$venv/bin/python" -m pip install -q --upgrade --no-deps desktop-env
echo "test-latest: newest releases differing from constraints.txt:"
"$venv/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check | LC_ALL=C sort \
  | LC_ALL=C comm -23 - <(grep '==' constraints.txt | LC_ALL=C sort) | sed 's/^/  /' || true
exec "$venv/bin/python" -m pytest -q -n 2 "$@"
