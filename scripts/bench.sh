#!/usr/bin/env bash
# Placeholder until `iwarp-peer bench` exists: runs the Go benchmarks once.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench . -benchmem ./...
