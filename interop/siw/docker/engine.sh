#!/usr/bin/env bash
# Makes a Docker engine answer on this machine, for `make siw-image`,
# `make interop-docker` and .ci/run. Idempotent:
#   - a daemon that answers `docker info` is used as it is;
#   - without dockerd, Debian's docker.io is installed (its services are kept
#     from starting: there is no init system to manage them here);
#   - without a daemon, dockerd is started in the background with no
#     iptables rules, no bridge (containers use --network host) and the vfs
#     storage driver (no overlay mounts needed), logging to $IWARP_DOCKERD_LOG.
# A dockerd this script starts and that does not answer within 60 s is
# stopped again (only that process), so no half-started daemon is left.
set -euo pipefail

LOG=${IWARP_DOCKERD_LOG:-/var/log/iwarp-go-dockerd.log}
PIDFILE=/var/run/docker.pid

log() { printf '[docker-engine] %s\n' "$*" >&2; }
die() { printf 'engine.sh: %s\n' "$*" >&2; exit 1; }

answers() { docker info >/dev/null 2>&1; }

# wait_answer N: waits up to N seconds for the daemon to answer.
wait_answer() {
  local i
  for ((i = 0; i < $1 * 4; i++)); do
    answers && return 0
    sleep 0.25
  done
  return 1
}

install_engine() {
  [ "$(id -u)" = 0 ] || die "dockerd is missing; install docker.io as root"
  log "installing docker.io from Debian's archive"
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d answering 101 keeps the package scripts from starting
  # services; one that exists already is left alone.
  local policy=/usr/sbin/policy-rc.d made=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=1
  fi
  local rc=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io >/dev/null; } || rc=$?
  [ $made = 0 ] || rm -f "$policy"
  [ $rc = 0 ] || die "apt-get install docker.io failed"
}

main() {
  if answers; then
    return 0
  fi
  command -v dockerd >/dev/null 2>&1 || install_engine
  command -v docker >/dev/null 2>&1 || die "no docker client after installing docker.io"
  [ "$(id -u)" = 0 ] || die "no Docker daemon answers and starting one needs root"

  # A dockerd that is still starting (another run of this script) gets
  # time; one that runs but never answers is not ours to stop.
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -qx dockerd "/proc/$pid/comm" 2>/dev/null; then
    log "dockerd (pid $pid) is running; waiting for it to answer"
    wait_answer 60 && return 0
    die "dockerd (pid $pid) runs but does not answer; see its log (this script's: $LOG)"
  fi
  # A pid file left by a daemon that died keeps a new one from starting.
  [ -z "$pid" ] || { log "removing the stale $PIDFILE (pid $pid is gone)"; rm -f "$PIDFILE"; }

  log "starting dockerd (vfs storage, no bridge, no iptables); log in $LOG"
  mkdir -p "$(dirname "$LOG")"
  setsid dockerd --iptables=false --bridge=none --storage-driver=vfs >>"$LOG" 2>&1 </dev/null &
  pid=$!
  if wait_answer 60; then
    log "dockerd (pid $pid) answers"
    return 0
  fi
  # (setsid may have forked: the daemon's own pid file names it.)
  local own
  own=$(cat "$PIDFILE" 2>/dev/null || true)
  if [ -n "$own" ] && grep -qx dockerd "/proc/$own/comm" 2>/dev/null; then pid=$own; fi
  log "dockerd (pid $pid) did not answer within 60 s; stopping it"
  kill "$pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 40; i++)); do
    [ -d "/proc/$pid" ] || break
    sleep 0.25
  done
  [ ! -d "/proc/$pid" ] || kill -9 "$pid" 2>/dev/null || true
  tail -n 20 "$LOG" >&2 || true
  die "could not start dockerd"
}

main "$@"
