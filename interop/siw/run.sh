#!/usr/bin/env bash
# Entry point of the siw interop harness (see README.md next to this file).
#
#   run.sh build      build or refresh the cached VM image only
#   run.sh all        build, then every scenario on one boot; summary table;
#                     exit status 1 if any scenario failed
#   run.sh list       list the scenarios
#   run.sh SCENARIO   one scenario (a test name with or without "Test", any case)
#   run.sh shell      interactive root shell in the guest on this terminal;
#                     leave with "poweroff -f" (or Ctrl-A x)
#   run.sh docs       copy the interop matrix of the last run (OUT/matrix.md)
#                     into docs/interop.md
#
# Environment: IWARP_CACHE (cache root), IWARP_SIW_OUT (results, default
# interop/siw/out), IWARP_SIW_TIMEOUT (whole go test run, default 30m),
# GO (go command).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
GO=${GO:-go}
OUT=${IWARP_SIW_OUT:-$HERE/out}
TIMEOUT=${IWARP_SIW_TIMEOUT:-30m}
PKG=./interop/siw/

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

build() { "$HERE/build.sh"; }

# QEMU runs under a work folder of this script; whatever happens, no QEMU
# of this run outlives it.
WORK=""
cleanup() {
  [ -n "$WORK" ] || return 0
  local f pid
  for f in "$WORK"/*/qemu.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q qemu "/proc/$pid/comm" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
new_work() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/siw-run.XXXXXX")
  export IWARP_SIW_WORKDIR=$WORK
}

list() {
  (cd "$REPO" && "$GO" test -tags interop -list '.*' "$PKG" | grep '^Test' | sed 's/^Test//')
}

# go test with the interop tag; output to the terminal and to $OUT/run.log.
gotest() {
  mkdir -p "$OUT"
  new_work
  export IWARP_SIW_OUT=$OUT
  local rc=0
  # pipefail: the pipeline fails when go test does.
  (cd "$REPO" && "$GO" test -tags interop -count=1 -v -timeout "$TIMEOUT" "$@" "$PKG") 2>&1 | tee "$OUT/run.log" || rc=1
  return $rc
}

# Prints scenario / result / duration from a go test -v log; scenarios that
# never reported (a crash or the overall timeout) show as "no result".
summary() {
  local log=$1 names=$2
  printf '\n%-32s %-10s %s\n' SCENARIO RESULT DURATION
  printf '%-32s %-10s %s\n' -------- ------ --------
  local n result dur failed=0
  for n in $names; do
    line=$(grep -E "^--- (PASS|FAIL|SKIP): Test$n \(" "$log" | tail -1 || true)
    if [ -z "$line" ]; then
      result="no result" dur="-"
      failed=1
    else
      result=$(printf '%s\n' "$line" | awk '{print $2}' | tr -d :)
      dur=$(printf '%s\n' "$line" | sed -E 's/.*\(([0-9.]+s)\).*/\1/')
      [ "$result" = FAIL ] && failed=1
    fi
    printf '%-32s %-10s %s\n' "$n" "$result" "$dur"
  done | tee "$OUT/summary.txt"
  grep -q 'FAIL\|no result' "$OUT/summary.txt" && failed=1
  [ $failed = 0 ] || echo "failed scenarios keep their logs and captures in $OUT/<TestName>/"
  return $failed
}

all() {
  build
  local names start rc=0
  names=$(list)
  start=$(date +%s)
  gotest || rc=1
  summary "$OUT/run.log" "$names" || rc=1
  echo "total $(( $(date +%s) - start ))s (without the build)"
  [ -f "$OUT/matrix.md" ] && echo "interop matrix: $OUT/matrix.md ('run.sh docs' puts it into docs/interop.md)"
  return $rc
}

# docs/interop.md holds the matrix of a full run between two marker lines;
# this replaces what is between them with OUT/matrix.md.
docs() {
  local m=$OUT/matrix.md doc=$REPO/docs/interop.md
  [ -f "$m" ] || { echo "no $m: run 'run.sh all' first" >&2; exit 1; }
  grep -q '^<!-- matrix:begin -->$' "$doc" && grep -q '^<!-- matrix:end -->$' "$doc" ||
    { echo "$doc lacks the matrix markers" >&2; exit 1; }
  awk -v m="$m" '
    /^<!-- matrix:begin -->$/ { print; while ((getline l < m) > 0) print l; skip = 1; next }
    /^<!-- matrix:end -->$/ { skip = 0 }
    !skip' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
  echo "updated $doc from $m"
}

one() {
  local want=${1#Test} names n match=""
  names=$(list)
  for n in $names; do
    if [ "${n,,}" = "${want,,}" ]; then match=$n; fi
  done
  [ -n "$match" ] || { echo "unknown scenario $1; scenarios:" >&2; echo "$names" >&2; exit 2; }
  build >/dev/null
  local rc=0
  gotest -run "^Test$match\$" || rc=1
  summary "$OUT/run.log" "$match" || rc=1
  return $rc
}

shell() {
  build >/dev/null
  # shellcheck disable=SC1091
  . "${IWARP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iwarp-go}/siw-lab/current.env"
  new_work
  # The share outlives the shell, so files the guest writes to /mnt stay.
  local share=$OUT/shell
  mkdir -p "$share"
  local fwd="" p
  for p in 7174 7175 7176 18515; do
    fwd+=",hostfwd=tcp:127.0.0.1:$((p + 10000))-10.0.2.15:$p"
  done
  cat >&2 <<EOF
Guest shell: siw0 is on eth0 (10.0.2.15); the host is 10.0.2.2; /mnt in the guest is $share.
Forwarded: 127.0.0.1:17174→7174, :17175→7175, :17176→7176, :28515→18515.
Try: rping -s -a 10.0.2.15 -v &  rping -c -a 10.0.2.15 -C 3 -v ; iwtest -h
Leave with: poweroff -f   (or Ctrl-A x; Ctrl-A c gives the QEMU monitor)
EOF
  qemu-system-x86_64 -accel tcg -cpu max -smp 1 -m 1024 \
    -kernel "$SIW_KERNEL" -initrd "$SIW_INITRD" \
    -append "console=ttyS0 panic=-1 mitigations=off no_timer_check loglevel=4 lab=shell" \
    -no-reboot -nodefaults -display none -vga none \
    -netdev "user,id=n0,ipv6=off$fwd" -device virtio-net-pci,netdev=n0 \
    -virtfs "local,path=$share,mount_tag=share,security_model=none,id=fs0" \
    -serial mon:stdio -pidfile "$WORK/qemu.pid"
}

case ${1:-} in
  build) build ;;
  all) all ;;
  list) list ;;
  shell) shell ;;
  docs) docs ;;
  "" | -h | --help | help) usage ;;
  *) one "$1" ;;
esac
