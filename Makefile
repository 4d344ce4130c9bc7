# tabfence — two commands matter: `make demo` and `make test`.
# Everything they need (Chromium, PostgreSQL, the wasm test runner) is
# installed by the targets themselves on a fresh Debian machine.

GO        ?= go
DIST      := dist
BIN       := $(CURDIR)/.bin
CHROMIUM  := /usr/bin/chromium
WASMEXEC  := $(BIN)/go_js_wasm_exec
GOROOT    := $(shell $(GO) env GOROOT)
WASM_PKGS := ./jsglue/... ./locks/... ./channel/... ./idb/... ./outbox/... ./wasm/...
ADDR      ?= 127.0.0.1:8080

export PATH := $(BIN):$(PATH)

.PHONY: all build test test-native test-wasm test-e2e bench demo clean deps chromium postgres wasmexec brotli

all: build

## build: dist/tabfence.wasm (and tabfence-core.wasm, without the outbox), wasm_exec.js, the ES module loader and its types
build: $(DIST)/tabfence.wasm $(DIST)/tabfence-core.wasm $(DIST)/wasm_exec.js $(DIST)/tabfence.js $(DIST)/tabfence.d.ts

$(DIST):
	mkdir -p $(DIST)

.PHONY: $(DIST)/tabfence.wasm
$(DIST)/tabfence.wasm: | $(DIST)
	GOOS=js GOARCH=wasm $(GO) build -trimpath -ldflags='-s -w' -o $@ ./wasm

# The runtime without the outbox, for apps that need no offline queue.
.PHONY: $(DIST)/tabfence-core.wasm
$(DIST)/tabfence-core.wasm: | $(DIST)
	GOOS=js GOARCH=wasm $(GO) build -tags tabfence_core -trimpath -ldflags='-s -w' -o $@ ./wasm

$(DIST)/wasm_exec.js: | $(DIST)
	cp "$(GOROOT)/lib/wasm/wasm_exec.js" $@

$(DIST)/tabfence.js: jsglue/loader/tabfence.js | $(DIST)
	cp $< $@

$(DIST)/tabfence.d.ts: jsglue/loader/tabfence.d.ts | $(DIST)
	cp $< $@

## deps: everything the tests need that a fresh Debian machine lacks
deps: chromium postgres wasmexec

chromium:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "installing Debian's postgresql"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

# brotli measures the download as a server would send it (make bench).
brotli:
	@command -v brotli >/dev/null || { echo "installing Debian's brotli"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq brotli >/dev/null; }

# wasmbrowsertest runs `GOOS=js GOARCH=wasm go test` binaries in Chromium;
# the go command finds it on PATH under the name go_js_wasm_exec.
wasmexec: $(WASMEXEC)
$(WASMEXEC):
	GOBIN=$(BIN) $(GO) install github.com/agnivade/wasmbrowsertest@v0.11.0
	ln -sf wasmbrowsertest $(WASMEXEC)

## test: every test — native, in-browser (wasm in Chromium), multi-tab e2e
test: deps build
	bash internal/testenv/with-postgres.sh $(MAKE) --no-print-directory test-native
	$(MAKE) --no-print-directory test-wasm
	$(MAKE) --no-print-directory test-e2e

test-native:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

test-wasm: wasmexec chromium
	GOOS=js GOARCH=wasm $(GO) test -count=1 $(WASM_PKGS)
	GOOS=js GOARCH=wasm $(GO) test -count=1 -tags tabfence_core ./wasm/

test-e2e: build chromium
	$(GO) test -tags e2e -count=1 -timeout 20m ./e2e/...

## bench: figures — browser runtime vs raw JavaScript, sizes, server throughput
bench: deps brotli build
	bash internal/testenv/with-postgres.sh $(GO) run ./internal/bench $(BENCHFLAGS)

## demo: build and serve the demo on http://$(ADDR)/
demo: build
	$(GO) run ./cmd/tabfence serve --addr $(ADDR) --dist $(DIST)

clean:
	rm -rf $(DIST) $(BIN) bench-out
