#!/usr/bin/env bash
# The whole proof, beyond CI's budget: every row (references and alternatives) of every
# variant on the local sandbox and on docker. CI (.ci/run) replays every row on local and
# the four references of the application variants on docker; this adds their alternatives
# on docker (docs/execution.md, "Where CI proves the suite"). Needs a Docker engine
# (scripts/docker-engine.sh) and the full image (osguard image build --flavor full).
set -euo pipefail
cd "$(dirname "$0")/.."
workers="${1:-4}"
.venv/bin/osguard check --workers "$workers"
.venv/bin/osguard check --provider docker --workers "$workers"
