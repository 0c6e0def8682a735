#!/usr/bin/env bash
# Compares two iwarp-peer binaries (before and after a change) with the bench
# table's rows: for each row, N runs of each, alternated in one sitting
# (before, after, before, …), and prints a markdown table of the medians.
#
#   ./scripts/bench-compare.sh OLD_BINARY NEW_BINARY [N] [DURATION]
set -euo pipefail
old=$1 new=$2 n=${3:-5} dur=${4:-500ms}

rows=(
	"write 64" "write 4KiB" "write 1MiB" "write 1MiB --crc"
	"read 64" "read 4KiB" "read 1MiB"
	"send 64" "send 4KiB" "send 1MiB" "send 8"
)
get() { grep -o "\"$1\":[^,}]*" <<<"$2" | head -n1 | cut -d: -f2- | tr -d '"'; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "Load before: $(cut -d' ' -f1-3 /proc/loadavg); $n paired runs per row, $dur per phase."
echo
echo "| op | size | CRC | before Gb/s | after Gb/s | change | before p50 µs | after p50 µs | change |"
echo "|---|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
	read -r op size extra <<<"$row"
	ob=() nb=() ol=() nl=()
	for ((i = 0; i < n; i++)); do
		for which in old new; do
			bin=$old
			[[ $which == new ]] && bin=$new
			# shellcheck disable=SC2086
			j=$("$bin" bench --loopback --json --duration "$dur" --op "$op" --size "$size" $extra | tail -n1)
			if [[ $which == old ]]; then ob+=("$(get gbps "$j")"); ol+=("$(get lat_p50_us "$j")")
			else nb+=("$(get gbps "$j")"); nl+=("$(get lat_p50_us "$j")"); fi
		done
	done
	mob=$(printf '%s\n' "${ob[@]}" | median) mnb=$(printf '%s\n' "${nb[@]}" | median)
	mol=$(printf '%s\n' "${ol[@]}" | median) mnl=$(printf '%s\n' "${nl[@]}" | median)
	crc=off
	[[ -n ${extra:-} ]] && crc=on
	awk -v op="$op" -v size="$size" -v crc="$crc" -v ob="$mob" -v nb="$mnb" -v ol="$mol" -v nl="$mnl" 'BEGIN {
		printf "| %s | %s | %s | %.3f | %.3f | %+.1f %% | %.1f | %.1f | %+.1f %% |\n", op, size, crc, ob, nb, (nb/ob-1)*100, ol, nl, (nl/ol-1)*100 }'
done
echo
echo "Load after: $(cut -d' ' -f1-3 /proc/loadavg)."
