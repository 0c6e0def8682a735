# iwarp-go — the two set-up commands are `make demo` and `make test`.
GO ?= go
# Total wall-clock budget, in seconds, for the short fuzz pass inside `make test`.
FUZZ_BUDGET ?= 120
# Per-target time for `make fuzz`.
FUZZTIME ?= 60s

# Library packages that must build, tests included, on every supported
# system: `make vet` names each one, so a package that build tags leave empty
# on some system fails there. Add every new library package here.
PORTABLE_PKGS = ./mpa ./ddp ./rdmap ./stag ./termcode ./conn ./dissect ./pcaptap ./pmemsink ./pmemsink/crashsim ./rpma ./perftest ./metrics ./metrics/iwarpprom ./metrics/iwarpexpvar ./cmd/iwarp-peer
# The GOOS/GOARCH pairs they support.
PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 \
	windows/amd64 windows/arm64 freebsd/amd64 freebsd/arm64

# staticcheck release (2026.2.2, built for Go 1.26); `make staticcheck-install`
# fetches it through the Go module proxy.
STATICCHECK_VERSION = v0.8.2
STATICCHECK ?= $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/staticcheck

.PHONY: demo test unit fuzz fuzz-short bench bench-scale interop vet staticcheck staticcheck-install

# A client and a server over loopback: Send/Receive, RDMA Write and Read,
# every byte verified (exit status 0 on success).
demo:
	$(GO) run ./cmd/iwarp-peer demo

# The README's test command: gofmt and vet (every supported system), staticcheck,
# every package's tests (seed corpora included) under the race detector,
# then a short fuzz pass over every fuzz target.
test: vet staticcheck unit fuzz-short

# go vet type-checks test files too, so this also proves every _test.go
# compiles on each system.
vet:
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt would change:" $$unformatted >&2; exit 1; fi
	$(GO) vet ./...
	@failed=; for p in $(PLATFORMS); do \
		echo "go vet ($$p) $(PORTABLE_PKGS)"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet $(PORTABLE_PKGS) || failed="$$failed $$p"; \
	done; \
	if [ -n "$$failed" ]; then echo "go vet failed for:$$failed" >&2; exit 1; fi

# The interop suite's files carry the "interop" build tag, the Docker
# scenarios' "interopdocker": each checked in a pass of its own.
staticcheck:
	@test -x $(STATICCHECK) || $(MAKE) staticcheck-install
	@rc=0; \
	$(STATICCHECK) ./... || rc=1; \
	$(STATICCHECK) -tags interop ./interop/... || rc=1; \
	$(STATICCHECK) -tags interopdocker ./interop/siw/docker/ || rc=1; \
	exit $$rc

staticcheck-install:
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

unit:
	$(GO) test -race -count=1 ./...

fuzz-short:
	./scripts/fuzz.sh --budget $(FUZZ_BUDGET)

fuzz:
	./scripts/fuzz.sh --each $(FUZZTIME)

# iwarp-go beside raw Go TCP on loopback, and durable writes into a pmemsink
# region beside the same work done locally, written into docs/performance.md;
# REPEAT (runs per row, default 5) and DURATION (per phase, default 500ms)
# may be set: make bench REPEAT=9 DURATION=2s; COUNT and BENCHTIME for the
# durable-write rows (default 3 and 200ms).
bench:
	./scripts/bench.sh

# BenchmarkScale100000QPs inside the siw lab's guest, where RLIMIT_NOFILE
# can be raised (interop/siw/scale.sh); SCALE_BENCH picks another row.
SCALE_BENCH ?= Scale100000QPs$$
bench-scale:
	./interop/siw/scale.sh '$(SCALE_BENCH)'

interop:
	./interop/siw/run.sh all

# The siw peer as a Docker image (interop/siw/docker/): build it, or run the
# interop scenarios through it. Both start a Docker engine if none runs.
.PHONY: siw-image interop-docker
siw-image:
	./interop/siw/docker/image.sh

interop-docker:
	./interop/siw/docker/test.sh
