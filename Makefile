# eve for Go on Temporal. Needs only Go (1.26) on a fresh machine:
#
#   make dev     # the whole stack: Temporal dev server (SQLite in .eve/), worker, API server
#   make test    # go vet + every test, against real Temporal dev servers
#
# The Temporal CLI (dev server) is built once from the Go module proxy into
# ./bin/temporal (about 2.5 minutes). Set EVE_TEMPORAL_BIN to use another one.

SHELL := /bin/bash
GO ?= go
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL_CLI_MODULE := github.com/temporalio/cli/cmd/temporal

# The dev-server binary the other targets need ($EVE_TEMPORAL_BIN wins).
TEMPORAL_BIN := $(if $(EVE_TEMPORAL_BIN),$(EVE_TEMPORAL_BIN),bin/temporal)

.PHONY: all build test test-go test-node test-examples dev bench fmt vet clean distclean

all: build

# Built only when absent. Installed into a temporary directory first so an
# interrupted build never leaves a half-written bin/temporal behind.
bin/temporal:
	@echo "Building the Temporal CLI $(TEMPORAL_CLI_VERSION) (dev server) into ./bin from the Go module proxy; this takes a few minutes once..."
	@rm -rf bin/.temporal-tmp && mkdir -p bin/.temporal-tmp
	GOBIN=$(CURDIR)/bin/.temporal-tmp $(GO) install $(TEMPORAL_CLI_MODULE)@$(TEMPORAL_CLI_VERSION)
	@mv bin/.temporal-tmp/temporal bin/temporal && rm -rf bin/.temporal-tmp
	@echo "bin/temporal ready."

build:
	$(GO) build ./...
	$(GO) build -o bin/eve ./cmd/eve
	$(GO) build -o bin/worker ./cmd/worker

vet:
	$(GO) vet ./...

test: $(TEMPORAL_BIN) test-go test-examples test-node

test-go: $(TEMPORAL_BIN)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...

# Example apps, each its own module (replace => ../..): built, vetted, and
# their flows run over HTTP against their own binary's `dev`.
test-examples: $(TEMPORAL_BIN)
	cd examples/shop && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) vet ./... && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) test -count=1 -timeout 10m ./...

# The official eve client (npm eve@0.80.1, pinned by test/node/package-lock.json)
# driving eve serve + a worker + a dev server that the suite starts itself.
test-node: $(TEMPORAL_BIN)
	cd test/node && npm ci --no-audit --no-fund && npm test

dev: $(TEMPORAL_BIN)
	$(GO) run ./cmd/eve dev

# Raw Temporal SDK vs eve on the same dev servers; parked-session memory;
# the tools API's catalog benchmarks.
bench: $(TEMPORAL_BIN)
	$(GO) run ./cmd/bench
	$(GO) run ./cmd/parkbench -n 1000,10000
	EVE_TOOLS_BENCH=1 $(GO) test -count=1 -run TestBench -v ./internal/toolsapi/

fmt:
	$(GO) fmt ./...

# Keeps bin/temporal (slow to rebuild) and .eve/ (your dev server's state).
clean:
	rm -rf bin/eve bin/worker bin/.temporal-tmp
	$(GO) clean -testcache

distclean: clean
	rm -rf bin .eve
