#!/usr/bin/env bash
# Part of make bench: durable writes into a served pmemsink region beside the
# same work done locally, written into docs/performance.md between its
# "durable:begin" and "durable:end" markers.
#
# One `go test -bench` run of package pmemsink measures, COUNT times each:
#   BenchmarkDurableWrite  an initiator RDMA-Writes SIZE bytes into a sink
#                          served over loopback in the same process, and
#                          flushes after every EVERY writes, per method and mode;
#   BenchmarkDurableWriteFlush the flush-every-1 rows through WriteFlush
#                          (the Write and the flush's request posted together);
#   BenchmarkLocalPersist  the same writes into the mapping and the same
#                          persist, locally;
#   BenchmarkRoundTrip8    an 8-byte RDMA Read of the sink (no persist);
#   BenchmarkPlainWriteRead a 4 KiB RDMA Write and an 8-byte Read of plain
#                          memory (no sink): the transport's share.
# Cells are medians of the COUNT runs.
#
#   COUNT=3 BENCHTIME=200ms OUT=docs/performance.md ./scripts/bench-durable.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-3}
BENCHTIME=${BENCHTIME:-200ms}
OUT=${OUT:-docs/performance.md}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
go test -run '^$' -bench 'BenchmarkDurableWrite|BenchmarkLocalPersist|BenchmarkRoundTrip8|BenchmarkPlainWriteRead' \
	-benchtime "$BENCHTIME" -count "$COUNT" -benchmem ./pmemsink/ | tee "$tmp/raw.txt" >&2
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# One line per benchmark: name (without "Benchmark" and the -GOMAXPROCS
# suffix), median ns/op, median MB/s, largest allocs/op.
awk '
	/^Benchmark/ {
		name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
		ns[name] = ns[name] " " $3
		mb = "-"; allocs = 0
		for (i = 4; i < NF; i++) {
			if ($(i+1) == "MB/s") mb = $i
			if ($(i+1) == "allocs/op") allocs = $i
		}
		mbs[name] = mbs[name] " " mb
		if (!(name in al) || allocs > al[name]) al[name] = allocs
		if (!(name in seen)) { seen[name] = 1; order[++n] = name }
	}
	function median(s,   a, k, i, j, t) {
		k = split(s, a, " ")
		if (a[1] == "-") return "-"
		for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return (k % 2) ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2
	}
	END { for (i = 1; i <= n; i++) print order[i], median(ns[order[i]]), median(mbs[order[i]]), al[order[i]] }
' "$tmp/raw.txt" >"$tmp/med.txt"

get() { # get NAME FIELD(2 ns, 3 MB/s, 4 allocs)
	awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$tmp/med.txt"
}
us() { # nanoseconds as microseconds
	local v
	v=$(get "$1" 2)
	if [[ -z $v ]]; then echo "–"; else awk -v x="$v" 'BEGIN { printf "%.2f", x / 1000 }'; fi
}
mb() {
	local v
	v=$(get "$1" 3)
	if [[ -z $v || $v == - ]]; then echo "–"; else awk -v x="$v" 'BEGIN { printf "%.0f", x }'; fi
}

modes=$(awk '$1 ~ /^DurableWrite\// { split($1, p, "/"); print p[2] }' "$tmp/med.txt" | awk '!s[$0]++')
methods="flush-extension gpspm read-after-write"
table="$tmp/table.md"
{
	echo "| mode | write | flush every | local µs/write | local MB/s | flush-extension µs/write | MB/s | gpspm µs/write | MB/s | read-after-write µs/write | MB/s |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for m in $modes; do
		for size in 1 4 64; do
			for every in 1 16 256; do
				row="| $m | $size KiB | $every | $(us "LocalPersist/$m/${size}KiB/persist-every-$every") | $(mb "LocalPersist/$m/${size}KiB/persist-every-$every")"
				for meth in $methods; do
					n="DurableWrite/$m/$meth/${size}KiB/flush-every-$every"
					row="$row | $(us "$n") | $(mb "$n")"
				done
				echo "$row |"
			done
		done
	done
} >"$table"

rtt="$tmp/rtt.md"
{
	echo "| mode | 8-byte RDMA Read round trip µs |"
	echo "|---|---|"
	for m in $modes; do echo "| $m | $(us "RoundTrip8/$m") |"; done
	echo
	echo "A 4 KiB RDMA Write followed by an 8-byte RDMA Read of plain registered memory (no sink, conn alone): $(us PlainWriteRead) µs."
} >"$rtt"

allocs=$(awk '$1 ~ /^DurableWrite(Flush)?\// && $4 > max { max = $4 } END { print max + 0 }' "$tmp/med.txt")

goals="$tmp/goals.md"
# goal BENCHMARK METHOD HOW: one goal line, the remote durable write of
# BENCHMARK against a local persist plus the 8-byte round trip.
goal() {
	local remote_ns local_ns rt_ns
	remote_ns=$(get "$1" 2)
	local_ns=$(get "LocalPersist/volatile-tmpfs/4KiB/persist-every-1" 2)
	rt_ns=$(get "RoundTrip8/volatile-tmpfs" 2)
	if [[ -z $remote_ns || -z $local_ns || -z $rt_ns ]]; then
		echo "- $2, $3: not measured"
		return
	fi
	awk -v r="$remote_ns" -v l="$local_ns" -v t="$rt_ns" -v m="$2" -v how="$3" 'BEGIN {
		v = r / (l + t)
		printf "- %s, volatile, 4 KiB %s: %.1f µs / (local %.2f µs + round trip %.1f µs) = %.2f (goal <= 1.2): %s\n",
			m, how, r / 1000, l / 1000, t / 1000, v, (v <= 1.2) ? "met" : "missed"
	}'
}
{
	for meth in $methods; do
		goal "DurableWrite/volatile-tmpfs/$meth/4KiB/flush-every-1" "$meth" "written then flushed"
	done
	for meth in $methods; do
		goal "DurableWriteFlush/volatile-tmpfs/$meth/4KiB" "$meth" "by WriteFlush (Write and flush posted together)"
	done
	echo "- heap allocations per remote durable write (most of any row): $allocs"
} >"$goals"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
section="$tmp/section.md"
{
	echo "<!-- durable:begin (written by scripts/bench-durable.sh; edits here are overwritten) -->"
	echo
	echo "Measured $started on: $cpu, $(nproc) cores, $(go version | cut -d' ' -f3-), Linux $(uname -r)."
	echo "Load average (1, 5, 15 min) before: $load_before; after: $load_after."
	echo "\`go test -bench 'DurableWrite|LocalPersist|RoundTrip8|PlainWriteRead' -benchtime $BENCHTIME -count $COUNT ./pmemsink/\`;"
	echo "each cell the median of the $COUNT runs. µs per write (the flush's cost shared by the writes it covers)."
	echo
	cat "$table"
	echo
	cat "$rtt"
	echo
	echo "Goal, on the medians (the remote write against a local persist plus one 8-byte round trip):"
	echo
	cat "$goals"
	echo
	echo "<!-- durable:end -->"
} >"$section"

# shellcheck source=scripts/section.sh
. scripts/section.sh
write_section "$OUT" durable "$section" "## Durable writes into a pmemsink region"
cat "$section"
