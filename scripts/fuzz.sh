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
for t in "${targets[@]}"; do
  set -- $t
  echo "== $2 ($1)"
  $GO test -run '^$' -fuzz "^$2\$" -fuzztime "$each" "$1"
done
