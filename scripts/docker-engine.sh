#!/usr/bin/env bash
# Start a Docker engine for osguard's docker provider, idempotently.
#
#   bash scripts/docker-engine.sh          # install if missing, start if not running, wait
#   bash scripts/docker-engine.sh --stop   # stop the engine this script started
#
# Network rule: the engine runs with --bridge=none --iptables=false, so it creates no
# bridge and touches no firewall; osguard containers use host networking (server bound
# to 127.0.0.1) or no network at all. Exits 0 once `docker info` answers; non-zero with
# a message saying why otherwise.
set -euo pipefail

PIDFILE=${OSGUARD_DOCKERD_PIDFILE:-/var/run/osguard-dockerd.pid}
LOG=${OSGUARD_DOCKERD_LOG:-/var/log/osguard-dockerd.log}
WAIT_SECONDS=${OSGUARD_DOCKERD_WAIT:-60}

die() { echo "docker-engine: $*" >&2; exit 1; }

sudo_cmd=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || die "must run as root (or with sudo available) to start dockerd"
  sudo_cmd="sudo"
fi

if [ "${1:-}" = "--stop" ]; then
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    $sudo_cmd kill "$(cat "$PIDFILE")"
    for _ in $(seq 1 50); do kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break; sleep 0.2; done
    echo "docker-engine: stopped"
  else
    echo "docker-engine: not running (no live pid in $PIDFILE)"
  fi
  exit 0
fi

engine_up() { docker info >/dev/null 2>&1; }

# 1. Packages: dockerd (docker.io) and debootstrap (the image build bootstraps Debian).
missing=""
command -v dockerd >/dev/null || missing="$missing docker.io"
command -v debootstrap >/dev/null || missing="$missing debootstrap"
if [ -n "$missing" ]; then
  echo "docker-engine: installing$missing"
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends $missing >/dev/null \
    || die "could not install$missing with apt-get"
fi
command -v docker >/dev/null || die "no docker client on PATH after installing docker.io"

# 2. Already running (ours or someone else's)? Done.
if engine_up; then
  echo "docker-engine: engine already running ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
  if docker network ls --format '{{.Driver}}' 2>/dev/null | grep -qx bridge; then
    # Not started by this script. osguard never attaches a container to a bridge (its
    # containers use the "none" and "host" networks), but say so rather than hide it.
    echo "docker-engine: note: this engine has a bridge network; osguard does not use it" \
         "(restart the engine with this script to run with --bridge=none --iptables=false)" >&2
  fi
  exit 0
fi

# 3. Start dockerd in the background. A stale pidfile from a dead engine is removed;
#    docker.io also ships containerd, which dockerd starts itself when none is running.
if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  $sudo_cmd rm -f "$PIDFILE"
fi
if [ ! -f "$PIDFILE" ]; then
  mkdir -p "$(dirname "$LOG")" 2>/dev/null || true
  echo "docker-engine: starting dockerd (log: $LOG)"
  $sudo_cmd bash -c "nohup dockerd --bridge=none --iptables=false --ip-masq=false \
      --pidfile='$PIDFILE' >>'$LOG' 2>&1 </dev/null &"
fi

# 4. Wait for the API.
deadline=$((SECONDS + WAIT_SECONDS))
until engine_up; do
  if [ $SECONDS -ge $deadline ]; then
    echo "docker-engine: the engine did not answer within ${WAIT_SECONDS}s; last log lines:" >&2
    tail -n 15 "$LOG" >&2 2>/dev/null || true
    exit 1
  fi
  if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "docker-engine: dockerd exited during start-up; last log lines:" >&2
    tail -n 15 "$LOG" >&2 2>/dev/null || true
    exit 1
  fi
  sleep 0.5
done
echo "docker-engine: engine ready ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
