#!/usr/bin/env bash
# make bench: iwarp-go beside raw Go TCP over loopback, written into
# docs/performance.md between its "bench:begin" and "bench:end" markers.
#
# Each row is `iwarp-peer bench --loopback --compare-tcp --repeat R
# --duration D`: R runs of iwarp-go and the raw TCP baseline, alternately,
# each phase (bandwidth, then latency) running for D; the table shows the
# medians and, in brackets, the smallest and largest value of the runs.
#
# Then scripts/bench-durable.sh adds the durable-write rows of package pmemsink
# (COUNT and BENCHTIME set its repeats and per-benchmark time).
#
#   REPEAT=5 DURATION=500ms OUT=docs/performance.md ./scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=${REPEAT:-5}
DURATION=${DURATION:-500ms}
OUT=${OUT:-docs/performance.md}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/iwarp-peer" ./cmd/iwarp-peer

# get KEY JSON prints a top-level field of the bench's flat JSON object.
get() {
	grep -o "\"$1\":[^,}]*" <<<"$2" | head -n1 | cut -d: -f2- | tr -d '"'
}

fmt() { # printf with awk, for numbers in exponent notation too
	awk -v f="$1" -v x="$2" 'BEGIN { printf f, x }'
}

# range KEY JSON FORMAT prints "median (min–max)".
range() {
	local m lo hi
	m=$(get "$1" "$2")
	lo=$(get "$1_min" "$2")
	hi=$(get "$1_max" "$2")
	if [[ -z $m ]]; then
		echo "–"
	elif [[ -z $lo ]]; then
		fmt "$3" "$m"
	else
		echo "$(fmt "$3" "$m") ($(fmt "$3" "$lo")–$(fmt "$3" "$hi"))"
	fi
}

rows=(
	"write 64"
	"write 4KiB"
	"write 1MiB"
	"write 1MiB --crc"
	"read 64"
	"read 4KiB"
	"read 1MiB"
	"send 64"
	"send 4KiB"
	"send 1MiB"
	"send 8"
)

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
table="$tmp/table.md"
{
	echo "| op | size | CRC | iwarp-go Gb/s | raw TCP Gb/s | ratio | iwarp-go msg/s | raw TCP msg/s | iwarp-go p50 µs | raw TCP p50 µs | latency ratio | iwarp-go p99 µs | raw TCP p99 µs |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$table"
for row in "${rows[@]}"; do
	read -r op size extra <<<"$row"
	echo "bench: $op $size ${extra:-} ..." >&2
	# shellcheck disable=SC2086 # $extra is a list of flags
	json=$("$tmp/iwarp-peer" bench --loopback --compare-tcp --json --repeat "$REPEAT" --duration "$DURATION" \
		--op "$op" --size "$size" $extra)
	echo "$json" >>"$tmp/runs.jsonl"
	crc=off
	[[ $(get crc "$json") == true ]] && crc=on
	echo "| $op | $size | $crc | $(range gbps "$json" %.3f) | $(range tcp_gbps "$json" %.3f) | $(range ratio "$json" %.2f)" \
		"| $(fmt %.0f "$(get msg_rate "$json")") | $(fmt %.0f "$(get tcp_msg_rate "$json")")" \
		"| $(range lat_p50_us "$json" %.1f) | $(range tcp_lat_p50_us "$json" %.1f) | $(range lat_ratio "$json" %.2f)" \
		"| $(fmt %.1f "$(get lat_p99_us "$json")") | $(fmt %.1f "$(get tcp_lat_p99_us "$json")") |" >>"$table"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The goals, judged on the medians.
pick() { # pick OP SIZE CRC KEY
	grep "\"op\":\"$1\",\"size\":$2,\"crc\":$3," "$tmp/runs.jsonl" | head -n1 | { read -r j; get "$4" "$j"; }
}
verdict() { # verdict VALUE OP LIMIT
	awk -v v="$1" -v op="$2" -v lim="$3" 'BEGIN { ok = (op == ">=") ? v >= lim : v <= lim; printf "%.2f (goal %s %s): %s", v, op, lim, ok ? "met" : "missed" }'
}
goals="$tmp/goals.md"
{
	echo "- 1 MiB RDMA Write bandwidth / raw TCP stream, CRC off: $(verdict "$(pick write 1048576 false ratio)" ">=" 0.9)"
	echo "- 1 MiB RDMA Write bandwidth / raw TCP stream, CRC on: $(verdict "$(pick write 1048576 true ratio)" ">=" 0.9)"
	echo "- 8-byte Send ping-pong median latency / raw TCP ping-pong: $(verdict "$(pick send 8 false lat_ratio)" "<=" 1.2)"
	echo "- 64-byte Send message rate / raw TCP length-prefixed stream: $(verdict "$(pick send 64 false ratio)" ">=" 0.8)"
} >"$goals"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
section="$tmp/section.md"
{
	echo "<!-- bench:begin (written by scripts/bench.sh; edits here are overwritten) -->"
	echo
	echo "Measured $started on: $cpu, $(nproc) cores, $(go version | cut -d' ' -f3-), Linux $(uname -r)."
	echo "Load average (1, 5, 15 min) before: $load_before; after: $load_after."
	echo "Each row: $REPEAT runs of \`iwarp-peer bench --loopback --compare-tcp --duration $DURATION\`;"
	echo "median (smallest–largest of the runs)."
	echo
	cat "$table"
	echo
	echo "Goals, on the medians:"
	echo
	cat "$goals"
	echo
	echo "<!-- bench:end -->"
} >"$section"

# shellcheck source=scripts/section.sh
. scripts/section.sh
write_section "$OUT" bench "$section" "# Performance"
cat "$section"

OUT="$OUT" ./scripts/bench-durable.sh
