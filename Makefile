# iwarp-go — the two set-up commands are `make demo` and `make test`.
GO ?= go
# Total wall-clock budget, in seconds, for the short fuzz pass inside `make test`.
FUZZ_BUDGET ?= 120
# Per-target time for `make fuzz`.
FUZZTIME ?= 60s

.PHONY: demo test unit fuzz fuzz-short bench interop vet

# A client and a server over loopback: Send/Receive, RDMA Write and Read,
# every byte verified (exit status 0 on success).
demo:
	$(GO) run ./cmd/iwarp-peer demo

# The README's test command: vet, every package's tests (seed corpora included)
# under the race detector, then a short fuzz pass over every fuzz target.
test: vet unit fuzz-short

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

fuzz-short:
	./scripts/fuzz.sh --budget $(FUZZ_BUDGET)

fuzz:
	./scripts/fuzz.sh --each $(FUZZTIME)

# iwarp-go beside raw Go TCP on loopback, written into docs/performance.md;
# REPEAT (runs per row, default 5) and DURATION (per phase, default 500ms)
# may be set: make bench REPEAT=9 DURATION=2s
bench:
	./scripts/bench.sh

interop:
	./interop/siw/run.sh all
