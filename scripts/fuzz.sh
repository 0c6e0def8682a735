#!/usr/bin/env bash
# Runs every fuzz target in the module.
#   fuzz.sh --budget SECONDS   share SECONDS of fuzzing between all targets (make test)
#   fuzz.sh --each DURATION    fuzz each target for DURATION (make fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
mode=budget; budget=120; each=60s
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) mode=budget; budget=$2; shift 2 ;;
    --each) mode=each; each=$2; shift 2 ;;
    *) echo "usage: $0 [--budget SECONDS | --each DURATION]" >&2; exit 2 ;;
  esac
done

targets=()
for pkg in $($GO list ./...); do
  for fn in $($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    targets+=("$pkg $fn")
  done
done
n=${#targets[@]}
if [ "$n" -eq 0 ]; then echo "fuzz: no fuzz targets"; exit 0; fi
if [ "$mode" = budget ]; then
  # Compilation costs a few seconds per target; keep the total near the budget.
  per=$(( budget / n - 3 ))
  [ "$per" -lt 2 ] && per=2
  each="${per}s"
fi
echo "fuzz: $n targets, ${each} each"
# Go 1.26's fuzz coordinator can fail a run at the -fuzztime deadline with
# a bare "context deadline exceeded" and no failing input (go.dev/issue/75804,
# fixed in Go 1.27), most often on a loaded machine. Such a run is repeated
# once; a failure that wrote a failing input, or any other failure, counts.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fuzz_one() {
  local rc=0
  $GO test -run '^$' -fuzz "^$2\$" -fuzztime "$each" "$1" 2>&1 | tee "$log" || rc=1
  if [ $rc -ne 0 ] && grep -q '^    context deadline exceeded$' "$log" && ! grep -q 'Failing input written to' "$log"; then
    return 2
  fi
  return $rc
}
for t in "${targets[@]}"; do
  set -- $t
  echo "== $2 ($1)"
  rc=0; fuzz_one "$1" "$2" || rc=$?
  if [ $rc -eq 2 ]; then
    echo "fuzz: $2 stopped by the coordinator's deadline race (go.dev/issue/75804), no failing input; once more"
    rc=0; fuzz_one "$1" "$2" || rc=$?
    if [ $rc -eq 2 ]; then
      echo "fuzz: $2 hit the deadline race twice, with no failing input: not counted as a failure"
      rc=0
    fi
  fi
  [ $rc -eq 0 ] || exit 1
done
