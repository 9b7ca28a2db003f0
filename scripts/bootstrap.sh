#!/usr/bin/env bash
# Set up osguard on a fresh Debian/Ubuntu machine: system packages (as root or with sudo),
# then a virtualenv in .venv with osguard installed at the versions pinned in constraints.txt. `--dev` adds the test dependencies
# (and desktop-env without its heavy dependencies: the tests drive osguard environments with
# OSWorld's own PythonController and SetupController).
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
for arg in "$@"; do
  case "$arg" in
    --dev) dev=1 ;;
    *) echo "usage: $0 [--dev]" >&2; exit 2 ;;
  esac
done

sudo_cmd=""
if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi

# System packages: one list per area in scripts/apt/*.txt (comments with #).
want=$(cat scripts/apt/*.txt 2>/dev/null | sed 's/#.*//' | tr -s ' \n' '\n' | sort -u | grep -v '^$' || true)
if [ "$dev" = 0 ]; then
  want=$(printf '%s\n' $want | grep -v -x -f <(sed 's/#.*//' scripts/apt/dev-only.list 2>/dev/null | grep -v '^$' || true) || true)
fi
missing=""
for pkg in $want; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  echo "osguard: installing system packages:$missing"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
target="."
if [ "$dev" = 1 ]; then target=".[dev]"; fi
log=$(mktemp -t osguard-pip.XXXXXX)
# Exact versions from constraints.txt (scripts/lock.sh), so every install is the one CI tested;
# scripts/test-latest.sh tries the newest releases in a separate venv.
pins=(-c constraints.txt)
if ! { .venv/bin/python -m pip install -q "${pins[@]}" --upgrade pip \
      && .venv/bin/python -m pip install -q "${pins[@]}" -e "$target" \
      && { [ "$dev" = 0 ] || .venv/bin/python -m pip install -q "${pins[@]}" --no-deps desktop-env; }; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "osguard: pip install failed (full log: $log)" >&2
  exit 1
fi
rm -f "$log"
echo "osguard: ready ($(.venv/bin/osguard --version))"
