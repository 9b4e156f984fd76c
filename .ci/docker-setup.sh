#!/usr/bin/env bash
# Makes a Docker engine available for the container tests (test/container/*.test.ts).
#
# - installs docker.io from apt when the docker CLI or dockerd is missing;
# - starts `dockerd --bridge=none --iptables=false` in the background when no daemon answers
#   (this machine has no bridge networking: containers run with --network host);
# - waits, bounded, until `docker info` answers.
#
# Exit status 0 means `docker info` works. Anything else prints why and exits non-zero, so the
# caller (.ci/run) can stop with a clear message instead of letting the container tests pass silently.
set -euo pipefail

WAIT_SECONDS="${DOCKER_SETUP_WAIT_SECONDS:-60}"
LOG_FILE="${DOCKER_SETUP_LOG:-/tmp/tollgate-dockerd.log}"

log() { printf 'docker-setup: %s\n' "$*" >&2; }

# Prefer the distribution's docker CLI when a different one shadows it on PATH: it matches dockerd.
docker_cli() {
  if [ -x /usr/bin/docker ]; then /usr/bin/docker "$@"; else docker "$@"; fi
}

if docker_cli info >/dev/null 2>&1; then
  log "docker daemon already running"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  log "dockerd not found: installing docker.io from apt"
  if [ "$(id -u)" -ne 0 ]; then
    log "cannot install docker.io: not root"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get update -qq
  timeout 600 apt-get install -y -qq docker.io >/dev/null
fi

if [ "$(id -u)" -ne 0 ]; then
  log "no docker daemon answers and starting one needs root"
  exit 1
fi

# containerd is started by dockerd itself when no system containerd socket exists.
log "starting dockerd (log: $LOG_FILE)"
nohup dockerd --bridge=none --iptables=false --ip6tables=false >"$LOG_FILE" 2>&1 &
echo $! >/tmp/tollgate-dockerd.pid

for _ in $(seq 1 "$WAIT_SECONDS"); do
  if docker_cli info >/dev/null 2>&1; then
    log "docker daemon is up ($(docker_cli version --format '{{.Server.Version}}' 2>/dev/null || echo unknown))"
    exit 0
  fi
  if ! kill -0 "$(cat /tmp/tollgate-dockerd.pid)" 2>/dev/null; then
    log "dockerd exited; last log lines:"
    tail -n 20 "$LOG_FILE" >&2 || true
    exit 1
  fi
  sleep 1
done

log "dockerd did not answer within ${WAIT_SECONDS}s; last log lines:"
tail -n 20 "$LOG_FILE" >&2 || true
exit 1
