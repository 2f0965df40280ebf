# revenant — the targets a newcomer and CI use. See README.md.
#
#   make build   compile every package
#   make test    run every test once (no cache)
#   make check   gofmt, go vet, go mod tidy without a diff, and core + recovery
#                built for linux/amd64, js/wasm and wasip1/wasm
#   make bench   the benchmarks behind the figures in the closing notes
#   make run     build and start the local server on 127.0.0.1:8787 (data/)
#   make guest   build the wasip1 guest, bin/revenant.wasm (docs/abi.md)
#   make simulate  the seeded eviction simulator's default campaign
#   make fuzz    the decoder, Host/Origin-check, router, header, guest ABI and permission fuzz targets, FUZZTIME inputs each (part of test)

GO      ?= go
GOFMT   ?= $(shell $(GO) env GOROOT)/bin/gofmt
# Packages that must build for every target core runs on (DESIGN §3).
PORTABLE = ./core/... ./recovery/...
TARGETS  = linux/amd64 js/wasm wasip1/wasm

.PHONY: all build guest test unit js fuzz check fmt vet tidy cross bench run run-guest simulate

all: build

build: guest
	$(GO) build ./...
	$(GO) build -o bin/revenant ./cmd/revenant

# The core compiled to a wasip1 reactor for one tree. Its files build only
# for wasip1, so ./... on the host skips them; cross vets them.
# The flags are internal/guestbuild.Flags (tests build the same guest).
guest:
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -gcflags='github.com/revenantrt/revenant/...=-l' -gcflags='github.com/revenantrt/revenant/wasm/abi=' -gcflags='github.com/revenantrt/revenant/wasm/guestdb=' -gcflags=fmt=-l -gcflags=internal/fmtsort=-l -gcflags=net/url=-l -gcflags=time=-l -ldflags='-s -w' -o bin/revenant.wasm ./wasm/guest

test: unit js fuzz

# -timeout bounds a hung test inside the 15 minutes make test may take (the
# e2e package, with the workerd campaigns, is the longest: several minutes).
unit:
	$(GO) test -count=1 -timeout 13m ./...

# The Worker's Go tests under Node (go_js_wasm_exec): the Durable Object
# host, the front (worker/) and cmd/worker, where node is installed; skipped otherwise. (The
# workerd e2e in ./e2e/ runs in unit when node_modules holds the pinned
# wrangler: .ci/run runs npm ci.)
js:
	@if command -v node >/dev/null 2>&1; then \
		echo "GOOS=js GOARCH=wasm $(GO) test -count=1 ./durableobject/... ./worker ./cmd/worker"; \
		PATH="$$PATH:$$($(GO) env GOROOT)/lib/wasm" GOOS=js GOARCH=wasm $(GO) test -count=1 ./durableobject/... ./worker ./cmd/worker; \
	else echo "js: no node on PATH: the Durable Object host's js/wasm tests are skipped"; fi

# Each fuzz target runs a fixed number of inputs; go test -fuzz takes one
# target at a time. A count, not a duration: Go 1.26's fuzz coordinator can
# report a spurious "context deadline exceeded" when a -fuzztime duration
# ends while a worker is mid-input (golang/go#75804, fixed in Go 1.27).
# FUZZ_TIMEOUT bounds a target that would hang.
FUZZTIME ?= 50000x
FUZZ_TIMEOUT ?= 5m
FUZZ_TARGETS = FuzzDecodePrompt FuzzDecodeCreate FuzzDecodeReply FuzzRequestSource
fuzz:
	@set -e; for f in $(FUZZ_TARGETS); do \
		echo "$(GO) test -run '^$$' -fuzz '^$$f$$' -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) ./core/api/"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) ./core/api/; \
	done
	$(GO) test -run '^$$' -fuzz '^FuzzMuxRoutesAsServeMux$$' -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) ./core/api/route/
	$(GO) test -run '^$$' -fuzz '^FuzzCanonicalKey$$' -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) ./core/httpmsg/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) ./wasm/abi/
	$(GO) test -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) ./core/permission/
	$(GO) test -run '^$$' -fuzz '^FuzzDecide$$' -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) ./core/permission/

check: fmt vet tidy cross

fmt:
	@echo "gofmt -l ."
	@out="$$($(GOFMT) -l .)"; if [ -n "$$out" ]; then \
		echo "these files need gofmt:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# go mod tidy -diff prints what tidy would change and fails if anything
# would, without touching go.mod or go.sum.
tidy:
	$(GO) mod tidy -diff

cross:
	@set -e; for t in $(TARGETS); do \
		echo "GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build $(PORTABLE)"; \
		CGO_ENABLED=0 GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build $(PORTABLE); \
	done
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./wasm/guest ./wasm/abi
	GOOS=js GOARCH=wasm $(GO) vet ./durableobject/... ./worker/... ./cmd/worker
	GOOS=js GOARCH=wasm $(GO) vet -tags revenant_testroutes ./durableobject/... ./worker/... ./cmd/worker

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./core/... ./recovery/ ./host/... ./wasm/runtime/ ./wasm/guestdb/

# The local server: offline model, embedded SQLite under data/, loopback.
# REVENANT_ADDR, REVENANT_DATA and REVENANT_TOKENS are read from the
# environment (README.md, Configuration).
run:
	$(GO) build -o bin/revenant ./cmd/revenant
	./bin/revenant

# The same server with every tree running as a wasm guest (README).
run-guest: guest
	$(GO) build -o bin/revenant ./cmd/revenant
	./bin/revenant -guest bin/revenant.wasm

# The seeded eviction simulator's default campaign (DESIGN §14): the real
# guest killed at host calls, zombies, then the checker. SEED=, SESSIONS=
# and KILLS= set the campaign; the summary ends with "violations: N" and a
# violation fails the target.
simulate: guest
	SEED=$(SEED) SESSIONS=$(SESSIONS) KILLS=$(KILLS) $(GO) run ./cmd/revenant simulate -guest bin/revenant.wasm

# The Cloudflare Worker's one Go program (cmd/worker: the front's role and
# the Tree objects') and Go's wasm_exec.js into build/, where
# durableobject/shim.js imports them (worker/entry.mjs takes the module from
# it). wrangler.toml's build command runs this target.
# BUILD= puts the outputs elsewhere and DO_TAGS= adds build tags (the e2e
# tests build revenant_testroutes into a tree of their own).
# revenant's packages, fmt, internal/fmtsort, net/url and time are compiled
# without inlining (-l), as in the guest: 102 KB less gzipped
# (docs/RATIONALE.md, "The module's headroom, won back"); durableobject, the
# SQL and request bridge to JS, keeps it.
BUILD ?= build
DO_TAGS ?=
do-build:
	mkdir -p $(BUILD)
	cp "$$($(GO) env GOROOT)/lib/wasm/wasm_exec.js" $(BUILD)/wasm_exec.js
	GOOS=js GOARCH=wasm $(GO) build -trimpath -gcflags='github.com/revenantrt/revenant/...=-l' -gcflags='github.com/revenantrt/revenant/durableobject=' -gcflags=fmt=-l -gcflags=internal/fmtsort=-l -gcflags=net/url=-l -gcflags=time=-l -ldflags="-s -w" -tags '$(DO_TAGS)' -o $(BUILD)/revenant.wasm ./cmd/worker

# wrangler dev on loopback with no network calls of wrangler's own, state
# under .wrangler/ (PLATFORM.md). DO_PORT= picks the port (8787). The
# banner goes too: printing it asks the npm registry for a newer wrangler
# at every start (cached a day under TMPDIR).
DO_PORT ?= 8787
# The pinned wrangler, run directly: npx would add its own start (about 0.3 s).
WRANGLER = node_modules/.bin/wrangler
WRANGLER_OFFLINE = CLOUDFLARE_CF_FETCH_ENABLED=false WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CI=1 NO_COLOR=1 WRANGLER_HIDE_BANNER=true
node_modules:
	npm ci

dev: node_modules
	$(WRANGLER_OFFLINE) $(WRANGLER) dev --ip 127.0.0.1 --port $(DO_PORT) --inspector-port 0 --persist-to .wrangler/state \
		--show-interactive-dev-session=false

# Deploy to the Cloudflare account wrangler is logged in to (wrangler login).
# The network is needed here, but not wrangler's usage metrics.
deploy: node_modules
	WRANGLER_SEND_METRICS=false $(WRANGLER) deploy

# Every workerd test, with the acceptance campaign's kill tests at 3 rounds
# (TestWorkerdSIGKILL, TestWorkerdToolTurnKills, TestWorkerdWebhookLedger:
# 42 kills, one after another, those three alone); the other workerd tests
# run two at a time (e2e/workerd_test.go).
e2e-workerd: node_modules
	WORKERD_KILL_ROUNDS=3 $(GO) test -count=1 -run TestWorkerd -v ./e2e/

.PHONY: do-build dev deploy e2e-workerd

# Side-by-side benchmarks on local workerd (e2e/workerd_bench_test.go):
# revenant's Durable Object vs a plain JS one (e2e/testdata/plainjs), cold,
# warm and SIGKILL recovery, p50/p90 over BENCH_SAMPLES (30) each. Not part
# of make test; runs wrangler serially.
BENCH_SAMPLES ?= 30
bench-workerd: node_modules
	REVENANT_BENCH_WORKERD=1 REVENANT_BENCH_SAMPLES=$(BENCH_SAMPLES) $(GO) test -count=1 -run '^TestWorkerdBench$$' -v -timeout 30m ./e2e/

.PHONY: bench-workerd
