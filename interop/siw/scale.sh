#!/usr/bin/env bash
# Runs conn's 100,000-queue-pair benchmark (BenchmarkScale100000QPs) inside
# the siw lab's guest, where we are root with every capability and so
# RLIMIT_NOFILE can be raised (on a host that forbids it the benchmark
# skips). Not part of make test, make interop or .ci/run: it keeps an
# emulated machine busy for a long time.
#
#   scale.sh [BENCH]   BENCH is -test.bench's pattern, default
#                      'Scale100000QPs$' (try 'Scale10000QPs$' first: it
#                      says how fast the emulator sets up connections)
#
# It builds the conn test binary on the host, boots the guest with
# lab=run (interop/siw/guest/init), which runs the run.sh this script
# writes into the share, and copies the benchmark's output to
# OUT/scale/bench.txt (console: OUT/scale/console.log).
#
# Environment: IWARP_SCALE_MEM (guest MiB, default 6144), IWARP_SCALE_CPUS
# (default 2), IWARP_SCALE_TIMEOUT (the whole guest run, default 75m; the
# guest is killed after it), IWARP_SIW_OUT (default interop/siw/out), GO.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
GO=${GO:-go}
BENCH=${1:-'Scale100000QPs$'}
MEM=${IWARP_SCALE_MEM:-6144}
CPUS=${IWARP_SCALE_CPUS:-2}
TIMEOUT=${IWARP_SCALE_TIMEOUT:-75m}
OUT=${IWARP_SIW_OUT:-$HERE/out}/scale

# Whatever happens, no QEMU of this run outlives it.
WORK=""
cleanup() {
  [ -n "$WORK" ] || return 0
  local pid
  pid=$(cat "$WORK/qemu.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q qemu "/proc/$pid/comm" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$HERE/build.sh" >/dev/null
# shellcheck disable=SC1091
. "${IWARP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iwarp-go}/siw-lab/current.env"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/siw-scale.XXXXXX")
share=$WORK/share
mkdir -p "$share" "$OUT"
# Static, so the guest's libraries do not matter; no race detector: the
# benchmark measures memory, and the detector multiplies it.
(cd "$REPO" && CGO_ENABLED=0 "$GO" test -c -o "$share/conn.test" ./conn)
rev=$(git -C "$REPO" rev-parse --short HEAD)
dirty=$(git -C "$REPO" status --porcelain -- conn | grep -q . && echo " (conn modified)" || true)

cat >"$share/run.sh" <<EOF
# Written by interop/siw/scale.sh; run by the guest's init (lab=run).
# 100,000 sockets in one process, 100,000 more as the other ends' peers
# in the kernel: a wider ephemeral range (fewer listeners needed), a
# backlog above the 32 connections set up at a time, TCP memory that does
# not press on 100,000 idle sockets, and nr_open above the benchmark's
# RLIMIT_NOFILE (which the benchmark raises itself).
echo 1048576 >/proc/sys/fs/nr_open
echo 2097152 >/proc/sys/fs/file-max
echo '1024 65535' >/proc/sys/net/ipv4/ip_local_port_range
echo 65535 >/proc/sys/net/core/somaxconn
echo 65535 >/proc/sys/net/ipv4/tcp_max_syn_backlog
echo '786432 1048576 1572864' >/proc/sys/net/ipv4/tcp_mem
echo 262144 >/proc/sys/net/ipv4/tcp_max_orphans
echo "guest: kernel \$(uname -r), \$(grep -c ^processor /proc/cpuinfo) CPUs, \$(grep MemTotal /proc/meminfo | tr -s ' ')"
echo "guest: RLIMIT_NOFILE \$(ulimit -Sn)/\$(ulimit -Hn), nr_open \$(cat /proc/sys/fs/nr_open), ports \$(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' ' ')"
echo "conn at $rev$dirty, -test.bench '$BENCH'"
cp /mnt/conn.test /tmp/conn.test
cd /tmp
start=\$(date +%s)
{ /tmp/conn.test -test.run '^\$' -test.bench '$BENCH' -test.benchtime 1x -test.benchmem -test.timeout 60m 2>&1
  echo \$? >/mnt/bench.rc; } | tee /mnt/bench.out
echo "guest: benchmark took \$((\$(date +%s) - start)) s"
sync
EOF

echo "booting the guest (-m $MEM -smp $CPUS, at most $TIMEOUT); console in $OUT/console.log" >&2
rc=0
timeout --kill-after=30s "$TIMEOUT" qemu-system-x86_64 -accel tcg -cpu max -smp "$CPUS" -m "$MEM" \
  -kernel "$SIW_KERNEL" -initrd "$SIW_INITRD" \
  -append "console=ttyS0 panic=-1 mitigations=off no_timer_check loglevel=4 lab=run" \
  -no-reboot -nodefaults -display none -vga none \
  -netdev "user,id=n0,ipv6=off" -device virtio-net-pci,netdev=n0 \
  -virtfs "local,path=$share,mount_tag=share,security_model=none,id=fs0" \
  -serial "file:$OUT/console.log" -monitor none -pidfile "$WORK/qemu.pid" </dev/null || rc=$?
[ $rc = 0 ] || echo "qemu ended with status $rc (124: the $TIMEOUT bound)" >&2

[ -f "$share/init.failed" ] && { echo "guest init failed: $(cat "$share/init.failed")" >&2; exit 1; }
[ -f "$share/bench.out" ] || { echo "no benchmark output; see $OUT/console.log" >&2; exit 1; }
cp "$share/bench.out" "$OUT/bench.txt"
grep '^guest:\|^conn at' "$OUT/console.log" >&2 || true
cat "$OUT/bench.txt"
brc=$(cat "$share/bench.rc" 2>/dev/null || echo "none (the run did not finish)")
echo "benchmark exit status: $brc; output in $OUT/bench.txt" >&2
[ "$brc" = 0 ] && [ $rc = 0 ]
