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
#                          memory (no sink): the transport's share;
#   BenchmarkColdRegion    1 MiB puts into a freshly opened 64 MiB sink, with
#                          and without pre-faulting, beside a touched MiB
#                          (a second go test run, 63 puts per run).
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
# The cold region: 1 MiB puts into a freshly opened 64 MiB sink, beside
# puts into a touched MiB (a fixed count: each sink serves 63 cold puts).
go test -run '^$' -bench 'BenchmarkColdRegion' -benchtime 63x -count "$COUNT" -benchmem ./pmemsink/ | tee "$tmp/cold.txt" >&2
grep '^Benchmark' "$tmp/cold.txt" >>"$tmp/raw.txt"
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

# cold_metric NAME UNIT: the median of a cold-region row's metric.
cold_metric() {
	awk -v n="BenchmarkColdRegion/$1" -v u="$2" '
		{ name = $1; sub(/-[0-9]+$/, "", name) }
		name == n { for (i = 4; i <= NF; i++) if ($i == u) v[++k] = $(i - 1) }
		END {
			if (k == 0) { print "–"; exit }
			for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
			print (k % 2) ? v[(k+1)/2] : (v[k/2] + v[k/2+1]) / 2
		}' "$tmp/cold.txt"
}
cold="$tmp/cold.md"
{
	echo "| row | ms per 1 MiB put | MB/s | page faults per put | Open of the 64 MiB sink, ms |"
	echo "|---|---|---|---|---|"
	for r in cold cold-no-prefault warm; do
		ns=$(get "ColdRegion/$r" 2)
		open_us=$(cold_metric "$r" open-µs)
		ms=–
		[[ -n $ns ]] && ms=$(awk -v x="$ns" 'BEGIN { printf "%.2f", x / 1e6 }')
		[[ $open_us != – ]] && open_us=$(awk -v x="$open_us" 'BEGIN { printf "%.0f", x / 1000 }')
		echo "| $r | $ms | $(mb "ColdRegion/$r") | $(cold_metric "$r" faults/op) | $open_us |"
	done
} >"$cold"
cold_goal() {
	local c w
	c=$(get ColdRegion/cold 2)
	w=$(get ColdRegion/warm 2)
	if [[ -z $c || -z $w ]]; then
		echo "- 1 MiB put into a fresh 64 MiB sink / into a touched one: not measured"
		return
	fi
	awk -v c="$c" -v w="$w" 'BEGIN { v = c / w; printf "- 1 MiB put into a fresh 64 MiB sink / into a touched one: %.2f ms / %.2f ms = %.2f (goal <= 2): %s\n", c / 1e6, w / 1e6, v, (v <= 2) ? "met" : "missed" }'
}

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
	cold_goal
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
	echo "The cold region (\`go test -bench ColdRegion -benchtime 63x -count $COUNT ./pmemsink/\`): a 1 MiB put (Write,"
	echo "then a read-after-write flush) into a volatile 64 MiB tmpfs sink; *cold* into a MiB nothing touched since"
	echo "Open (which pre-faults, \`WithPrefault\`), *cold-no-prefault* the same with \`WithPrefault(0)\`, *warm* into the"
	echo "same MiB again and again; each cell the median of the $COUNT runs:"
	echo
	cat "$cold"
	echo
	echo "Goals, on the medians (the remote write against a local persist plus one 8-byte round trip; the cold put"
	echo "against the warm one):"
	echo
	cat "$goals"
	echo
	echo "<!-- durable:end -->"
} >"$section"

# shellcheck source=scripts/section.sh
. scripts/section.sh
write_section "$OUT" durable "$section" "## Durable writes into a pmemsink region"
cat "$section"
