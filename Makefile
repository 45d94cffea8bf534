# larkline — the two commands a newcomer needs are `make demo` and `make test`.
# Both do all their own set-up: Go modules come from the module proxy, the Kafka broker
# jars from Maven Central (cached under ~/.cache/larkline/, outside the checkout).

SHELL      := /bin/bash
GO         ?= go
BIN        ?= bin/larkline
TEST_FLAGS ?= -race -shuffle=on -timeout 35m
PKGS       ?= ./...
BENCH      ?= .
BENCHTIME  ?= 1x
# The version `larkline version` prints: make build and make image stamp it with
# -ldflags (the binary otherwise falls back to the module or VCS information Go embeds).
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE      ?= larkline:$(VERSION)

# make chaos: the whole pipeline under kills and outages (docs/testing.md, "Chaos").
CHAOS_DURATION ?= 10m
CHAOS_CHATS    ?= 5
CHAOS_RATE     ?= 1.5
CHAOS_SEED     ?=
CHAOS_DRAIN    ?= 10m
CHAOS_TIMEOUT  ?= 90m

# make flakes: every package's tests FLAKES_COUNT times (-race -shuffle on) on the real
# broker and Postgres, then per package and per test the failed runs out of runs.
FLAKES_COUNT   ?= 10
FLAKES_TIMEOUT ?= 180m

# With PKGS=./..., the packages whose tests take longest (docs/testing.md, "Where the
# time goes") are named first: go test starts them first (it runs each package once),
# so they do not run alone at the end of the package phase.
SLOW_FIRST ?= processors/windows schemas connectors/postgres cmd/larkline connectors/lark/reconcile processors/synthesis internal/testenv

# The e2e tests run E2E_PARALLEL at a time (go test -parallel; its default is
# GOMAXPROCS): each is its own deployment and spends most of its time waiting on
# window clocks, leases and faults, so at two at a time the suite kept about one core
# busy (docs/testing.md, "Where the time goes").
E2E_PARALLEL ?= 4

# testreport prints go test's output as plain go test does, then the total time and
# the slowest packages and tests (with -runs, failures out of runs), and fails when
# any test or build failed (docs/testing.md, "Where the time goes").
REPORT = $(GO) run ./internal/testenv/cmd/testreport

.PHONY: all build image chart-test demo test flakes chaos bench bench-pipeline lint fmt vet clean kafka-fetch browser

all: lint build test chart-test

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/larkline

# The container image (deploy/Dockerfile: static binary, distroless, non-root), tagged
# $(IMAGE); needs docker (or DOCKER=podman) with BuildKit.
DOCKER ?= docker
image:
	$(DOCKER) build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) .

# The Helm chart (deploy/helm/larkline), rendered offline with the Helm Go library and
# checked object by object; its own module keeps Helm's dependencies out of larkline's.
chart-test:
	cd deploy/helm/charttest && $(GO) test -count=1 ./...

# The main job on the embedded default: in-process Kafka (kfake with a data directory),
# an embedded Postgres, the local Lark replaying the bundled incident chat.
demo:
	$(GO) run ./cmd/larkline demo $(DEMO_FLAGS)

# Every test, against a real Kafka broker and a real Postgres started once for the run
# by the harness (docs/testing.md says how it chooses them), and the tests of
# larkline's patches to Goka (internal/patched/goka, its own module: D32, D48). The
# end-to-end suite (test/e2e: five larkline processes per test, a private broker it
# restarts) runs after the package tests rather than beside them: on a 2-core machine
# its fault timings should not depend on which package tests happen to share the CPU.
test: browser
	$(GO) build -o /dev/null ./internal/testenv/cmd/testreport
	$(GO) run ./internal/testenv/cmd/testenv run -- bash -c 'set -eo pipefail; pkgs=$$($(GO) list $(PKGS) | grep -v "/test/e2e$$" || true); e2e=$$($(GO) list $(PKGS) | grep "/test/e2e$$" || true); { if [ -n "$$pkgs" ]; then $(GO) test -json $(TEST_FLAGS) $(if $(filter ./...,$(PKGS)),$(SLOW_FIRST:%=./%)) $$pkgs; fi; $(if $(filter ./...,$(PKGS)),$(GO) test -C internal/patched/goka -json $(TEST_FLAGS) .;) if [ -n "$$e2e" ]; then $(GO) test -json $(TEST_FLAGS) -parallel $(E2E_PARALLEL) $$e2e; fi; } | $(REPORT) -slowest 10'

# The web page's tests (internal/httpapi) run in a real headless Chromium: the binary
# LARKLINE_CHROMIUM names, or one on the PATH. When PKGS holds them and there is none,
# Debian's chromium is installed (as root, or with a sudo that asks no password);
# otherwise make stops here and says what to install.
CHROMIUMS = chromium chromium-browser google-chrome-stable google-chrome
browser:
	@if [ -z "$$LARKLINE_CHROMIUM" ] && $(GO) list $(PKGS) | grep -q '/internal/httpapi$$' && \
	  ! (for b in $(CHROMIUMS); do command -v $$b >/dev/null && exit 0; done; exit 1); then \
	  echo "== installing chromium for the browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif sudo -n true 2>/dev/null; then sudo=sudo; \
	  else echo "make: the web page tests need Chromium: apt-get install -y chromium, or set LARKLINE_CHROMIUM" >&2; exit 1; fi; \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# Every package's tests FLAKES_COUNT times against one real broker and Postgres.
# PKGS filters; test/e2e runs only when PKGS names it (ten e2e runs take hours).
flakes: browser
	$(GO) build -o /dev/null ./internal/testenv/cmd/testreport
	$(GO) run ./internal/testenv/cmd/testenv run -- bash -c 'set -o pipefail; pkgs=$$($(GO) list $(PKGS)); if [ "$(PKGS)" = "./..." ]; then pkgs=$$(echo "$$pkgs" | grep -v "/test/e2e$$"); fi; $(GO) test -json -race -shuffle=on -count $(FLAKES_COUNT) -timeout $(FLAKES_TIMEOUT) $$pkgs | $(REPORT) -runs -slowest 10'

# The chaos run: eight larkline processes (two each of windows, sink and synthesis) on a
# private broker and a private PostgreSQL it restarts, live traffic from larktest, and
# a fault loop from a printed seed (CHAOS_SEED=<n> repeats a run); then the invariants,
# as a table. Needs what make test needs (Java 17, Maven once, PostgreSQL server
# binaries). make test runs the same test for 3 minutes.
chaos:
	LARKLINE_TEST_CHAOS_DURATION=$(CHAOS_DURATION) LARKLINE_TEST_CHAOS_CHATS=$(CHAOS_CHATS) \
	LARKLINE_TEST_CHAOS_RATE=$(CHAOS_RATE) LARKLINE_TEST_CHAOS_SEED=$(CHAOS_SEED) LARKLINE_TEST_CHAOS_DRAIN=$(CHAOS_DRAIN) \
	$(GO) test -count=1 -v -run '^TestChaos$$' -timeout $(CHAOS_TIMEOUT) ./test/e2e

# Benchmarks and load commands; figures are recorded in docs/perf.md.
bench:
	$(GO) run ./internal/testenv/cmd/testenv run -- $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) $(PKGS)

# The whole pipeline under a stepped load, then scaled out to two replicas (docs/perf.md,
# "The whole pipeline"); the LARKLINE_LOAD_* variables of test/e2e/steps_test.go shape
# it (steps, chats, step length, backlog).
bench-pipeline:
	$(GO) run ./internal/testenv/cmd/testenv run -- $(GO) test -run '^$$' -bench '^BenchmarkPipeline(Steps|ScaleOut)$$' -benchtime 1x -timeout 120m ./test/e2e

lint: fmt vet

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

kafka-fetch:
	deploy/kafka/kafka-jvm.sh fetch

clean:
	rm -rf bin
