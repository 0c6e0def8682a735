#!/usr/bin/env bash
# Compares two iwarp-peer binaries (before and after a change) row by row:
# for each row, N runs of each, alternated in one sitting (before, after,
# before, …), each run beside raw TCP (--compare-tcp), and prints a markdown
# table of the medians. The ratios to raw TCP pair each run with the
# baseline measured right after it, so they compare better than the rates
# on a loaded machine; so does the CPU time per round trip of the latency
# phase (both sides, one process), which a busy neighbour slows less than
# it slows the clock. A figure a binary does not report (an older one:
# no p99 ratio, no raw TCP + CRC baseline, no --qps) shows as "–".
#
#   ./scripts/bench-compare.sh OLD_BINARY NEW_BINARY [N] [DURATION]
#   ROWS='write 1MiB --crc;send 8;write 64KiB --qps 16' ./scripts/bench-compare.sh old new
set -euo pipefail
old=$1 new=$2 n=${3:-5} dur=${4:-500ms}

if [[ -n ${ROWS:-} ]]; then
	IFS=';' read -r -a rows <<<"$ROWS"
else
	rows=(
		"write 64" "write 4KiB" "write 1MiB" "write 1MiB --crc"
		"read 64" "read 4KiB" "read 1MiB"
		"send 64" "send 4KiB" "send 1MiB" "send 8" "write 8"
	)
fi
# get KEY JSON prints a top-level field of the flat JSON object, or nothing.
get() { { grep -o "\"$1\":[^,}]*" <<<"$2" || true; } | head -n1 | cut -d: -f2- | tr -d '"'; }
# median of the non-empty lines of stdin; nothing if there are none.
median() { grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR == 0) exit; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}' || true; }
keys=(gbps ratio tcp_crc_ratio lat_p50_us lat_ratio lat_p99_us lat_p99_ratio lat_cpu_us_per_rt)

echo "Load before: $(cut -d' ' -f1-3 /proc/loadavg); $n paired runs per row, $dur per phase."
echo
echo "| row | before Gb/s | after Gb/s | change | before / TCP | after / TCP | before / TCP+CRC | after / TCP+CRC | before p50 µs | after p50 µs | before p50 / TCP | after p50 / TCP | before p99 µs | after p99 µs | before p99 / TCP | after p99 / TCP | before CPU µs / round trip | after CPU µs / round trip |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
	read -r op size extra <<<"$row"
	declare -A vals=()
	for ((i = 0; i < n; i++)); do
		for which in old new; do
			bin=$old
			[[ $which == new ]] && bin=$new
			# shellcheck disable=SC2086 # $extra is a list of flags
			j=$("$bin" bench --loopback --compare-tcp --json --duration "$dur" --op "$op" --size "$size" $extra 2>/dev/null | tail -n1) || j=
			for k in "${keys[@]}"; do
				vals[$which.$k]+="$(get "$k" "$j")"$'\n'
			done
		done
	done
	cell() { # cell WHICH KEY FORMAT
		local m
		m=$(printf '%s' "${vals[$1.$2]}" | median)
		if [[ -z $m ]]; then echo "–"; else awk -v f="$3" -v x="$m" 'BEGIN { printf f, x }'; fi
	}
	change() { # change KEY: after / before - 1
		local o nw
		o=$(printf '%s' "${vals[old.$1]}" | median)
		nw=$(printf '%s' "${vals[new.$1]}" | median)
		if [[ -z $o || -z $nw ]]; then echo "–"; else awk -v o="$o" -v n="$nw" 'BEGIN { printf "%+.1f %%", (n/o-1)*100 }'; fi
	}
	echo "| $op $size ${extra:-} | $(cell old gbps %.3f) | $(cell new gbps %.3f) | $(change gbps)" \
		"| $(cell old ratio %.2f) | $(cell new ratio %.2f) | $(cell old tcp_crc_ratio %.2f) | $(cell new tcp_crc_ratio %.2f)" \
		"| $(cell old lat_p50_us %.1f) | $(cell new lat_p50_us %.1f) | $(cell old lat_ratio %.2f) | $(cell new lat_ratio %.2f)" \
		"| $(cell old lat_p99_us %.1f) | $(cell new lat_p99_us %.1f) | $(cell old lat_p99_ratio %.2f) | $(cell new lat_p99_ratio %.2f)" \
		"| $(cell old lat_cpu_us_per_rt %.1f) | $(cell new lat_cpu_us_per_rt %.1f) |"
	unset vals
done
echo
echo "Load after: $(cut -d' ' -f1-3 /proc/loadavg)."
