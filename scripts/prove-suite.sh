#!/usr/bin/env bash
# The whole proof, beyond CI's budget: every row (references and alternatives) of every
# variant on the local sandbox and on docker. CI (.ci/run) replays every row on local and,
# on docker, every row of the root-only variants, both references of the shell variants and
# the safe reference of one application variant per domain; this adds all the rest
# on docker (docs/execution.md, "Where CI proves the suite"). Needs a Docker engine
# (scripts/docker-engine.sh) and the full image (osguard image build --flavor full).
set -euo pipefail
cd "$(dirname "$0")/.."
workers="${1:-4}"
.venv/bin/osguard check --workers "$workers"
.venv/bin/osguard check --provider docker --workers "$workers"
