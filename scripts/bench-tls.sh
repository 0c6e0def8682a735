#!/usr/bin/env bash
# Part of make bench: iWARP inside TLS beside raw crypto/tls streams, and
# plain iWARP beside raw TCP, on the same loopback, written into
# docs/performance.md between its "tls:begin" and "tls:end" markers.
#
# Rows (each `iwarp-peer bench --loopback --compare-tcp --repeat R --json`,
# the TLS ones with --tls-cert/--tls-key/--tls-ca, so mutually
# authenticated, CRC off on both):
#   - a 1 MiB RDMA Write stream (--duration D): bandwidth;
#   - an 8-byte Send ping-pong (LAT_ITERS round trips): p50 and p99.
# The certificates (a CA and one leaf, ECDSA P-256) are made with openssl
# in a temporary directory for the run and removed after it.
#
#   REPEAT=5 DURATION=500ms LAT_ITERS=20000 OUT=docs/performance.md ./scripts/bench-tls.sh
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

REPEAT=${REPEAT:-5}
DURATION=${DURATION:-500ms}
LAT_ITERS=${LAT_ITERS:-20000}
OUT=${OUT:-docs/performance.md}

command -v openssl >/dev/null || { echo "bench-tls: needs openssl to make the run's certificates" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/iwarp-peer" ./cmd/iwarp-peer
peer="$tmp/iwarp-peer"

(
	cd "$tmp"
	openssl ecparam -name prime256v1 -genkey -noout -out ca-key.pem
	openssl req -x509 -new -key ca-key.pem -subj /CN=bench-ca -days 1 -out ca.pem
	openssl ecparam -name prime256v1 -genkey -noout -out key.pem
	openssl req -new -key key.pem -subj /CN=localhost -out leaf.csr
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >leaf.ext
	openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 1 -extfile leaf.ext -out cert.pem
) 2>/dev/null
tls=(--tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --tls-ca "$tmp/ca.pem")

get() {
	{ grep -o "\"$1\":[^,}]*" <<<"$2" || true; } | head -n1 | cut -d: -f2- | tr -d '"'
}
num() { # num FORMAT VALUE, "–" for none
	if [[ -z $2 ]]; then echo "–"; else awk -v f="$1" -v x="$2" 'BEGIN { printf f, x }'; fi
}
run() { # run ARGS...: one bench, its JSON on stdout
	echo "bench-tls: $*" >&2
	"$peer" bench --loopback --compare-tcp --repeat "$REPEAT" --json "$@"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
bw_tls=$(run --op write --size 1m --duration "$DURATION" --lat-iters 0 "${tls[@]}")
bw_tcp=$(run --op write --size 1m --duration "$DURATION" --lat-iters 0)
lat_tls=$(run --op send --size 8 --iters 1000 --lat-iters "$LAT_ITERS" "${tls[@]}")
lat_tcp=$(run --op send --size 8 --iters 1000 --lat-iters "$LAT_ITERS")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

section="$tmp/section.md"
{
	echo "<!-- tls:begin (written by scripts/bench-tls.sh; edits here are overwritten) -->"
	echo
	echo "Measured $started with \`scripts/bench-tls.sh\` (REPEAT=$REPEAT, DURATION=$DURATION, LAT_ITERS=$LAT_ITERS): both"
	echo "ends in one process over loopback, medians of $REPEAT runs, CRC off. The machine has 2 cores shared with other"
	echo "work; load average (1, 5, 15 min) $load_before → $load_after. The TLS rows are mutually authenticated (ECDSA"
	echo "P-256, the TLS 1.3 default suite Go picks: AES-128-GCM where the CPU has AES instructions); the baseline is"
	echo "crypto/tls streams carrying the same messages."
	echo
	echo "| | iWARP Gb/s | baseline Gb/s | ratio | iWARP p50 µs | baseline p50 µs | ratio | iWARP p99 µs | baseline p99 µs |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for row in "inside TLS|raw TLS|$bw_tls|$lat_tls" "plain|raw TCP|$bw_tcp|$lat_tcp"; do
		IFS='|' read -r name base bw lat <<<"$row"
		echo "| $name, beside $base | $(num %.3f "$(get gbps "$bw")") | $(num %.3f "$(get tcp_gbps "$bw")") | $(num %.2f "$(get ratio "$bw")")" \
			"| $(num %.1f "$(get lat_p50_us "$lat")") | $(num %.1f "$(get tcp_lat_p50_us "$lat")") | $(num %.2f "$(get lat_ratio "$lat")")" \
			"| $(num %.1f "$(get lat_p99_us "$lat")") | $(num %.1f "$(get tcp_lat_p99_us "$lat")") |"
	done
	echo
	echo "Bandwidth: a 1 MiB RDMA Write stream, 64 in flight. Latency: an 8-byte Send ping-pong."
	echo
	echo "<!-- tls:end -->"
} >"$section"

# shellcheck source=scripts/section.sh
. scripts/section.sh
write_section "$OUT" tls "$section" "## TLS"
cat "$section"
