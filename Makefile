# tabfence — two commands matter: `make demo` and `make test`.
# Everything they need (Chromium, Firefox ESR, PostgreSQL, the wasm test runner) is
# installed by the targets themselves on a fresh Debian machine.

GO        ?= go
DIST      := dist
BIN       := $(CURDIR)/.bin
CHROMIUM  := /usr/bin/chromium
FIREFOX   := /usr/bin/firefox-esr
WASMEXEC  := $(BIN)/go_js_wasm_exec
GOROOT    := $(shell $(GO) env GOROOT)
WASM_PKGS := ./jsglue/... ./locks/... ./channel/... ./idb/... ./outbox/... ./wasm/... ./cmd/bench/browserbench/idbbench/
ADDR      ?= 127.0.0.1:8080

export PATH := $(BIN):$(PATH)

# How the runtime is compiled, shared by `make build`, `make test-wasm` and
# the bench's size report (which reads the WASM_GCFLAGS line below). The Go
# compiler's default inlining: it buys speed where Go's own code is the cost,
# at some download size (docs/build-notes.md has the measurements).
WASM_GCFLAGS :=
WASM_BUILD   := -trimpath -ldflags='-s -w' $(WASM_GCFLAGS)
# wasmpack rewrites each module's data and code sections so that they
# compress better, initializing the same memory and running the same code
# (internal/wasmpack).
WASMPACK     := $(BIN)/wasmpack
# -strip-lines also drops the file and line tables of Go's pclntab: a
# panic's stack trace then names every function but gives "?:0" for its
# file and line. For a module whose traces keep their lines:
# make build WASMPACK_FLAGS=
WASMPACK_FLAGS ?= -strip-lines

.PHONY: all build npm test test-native test-wasm test-e2e test-types bench demo shape clean deps chromium firefox node postgres wasmexec wasmpack brotli typescript

all: build

# The modules tabfence.js imports: the loader's fast path (core.js) and its
# hook groups, each beside the Go package it serves.
LOADER_MODULES := $(DIST)/tabfence-fast.js $(DIST)/tabfence-channel.js $(DIST)/tabfence-outbox.js $(DIST)/tabfence-api.js $(DIST)/tabfence-idb.js

# The modules precompressed beside themselves (name.wasm.br, name.wasm.gz),
# which `tabfence serve` and the assets package send to browsers that
# accept them.
COMPRESSED := $(foreach f,tabfence.wasm tabfence-core.wasm tabfence.js tabfence-sw.js wasm_exec.js $(notdir $(LOADER_MODULES)),$(foreach c,br gz,$(DIST)/$(f).$(c) $(DIST)/$(f).$(c).sha256))

## build: dist/tabfence.wasm (and tabfence-core.wasm, without the outbox) with .br/.gz beside them, wasm_exec.js, the ES module loader and its types, the Service Worker module tabfence-sw.js, the npm package in dist/npm
build: $(DIST)/tabfence.wasm $(DIST)/tabfence-core.wasm $(DIST)/wasm_exec.js $(DIST)/tabfence.js $(DIST)/tabfence.d.ts $(DIST)/tabfence-sw.js $(DIST)/tabfence-sw.d.ts $(LOADER_MODULES) $(COMPRESSED) npm

$(DIST):
	mkdir -p $(DIST)

# The modules are always rebuilt (go build's cache makes that cheap) but
# replace the file only when its bytes changed: make then sees the old
# time and does not compress again (brotli -q 11 takes seconds).
FORCE:
$(DIST)/tabfence.wasm: FORCE wasmpack | $(DIST)
	GOOS=js GOARCH=wasm $(GO) build $(WASM_BUILD) -o $@.new ./wasm
	$(WASMPACK) $(WASMPACK_FLAGS) $@.new
	@cmp -s $@.new $@ && rm $@.new || mv $@.new $@

# The runtime without the outbox, for apps that need no offline queue.
$(DIST)/tabfence-core.wasm: FORCE wasmpack | $(DIST)
	GOOS=js GOARCH=wasm $(GO) build -tags tabfence_core $(WASM_BUILD) -o $@.new ./wasm
	$(WASMPACK) $(WASMPACK_FLAGS) $@.new
	@cmp -s $@.new $@ && rm $@.new || mv $@.new $@

# Quality 11 and gzip -9: the files are compressed once, served many times.
# -n keeps gzip's output the same for the same input (no name, no time).
# Beside each copy, name.br.sha256 records the SHA-256 of the file it was
# made from (written after the copy): the assets handler serves a copy only
# when that is the current file's hash, whatever the files' times.
$(DIST)/%.br $(DIST)/%.br.sha256: $(DIST)/% | brotli
	brotli -q 11 -f -n -o $<.br $<
	sha256sum $< | cut -c1-64 > $<.br.sha256
$(DIST)/%.gz $(DIST)/%.gz.sha256: $(DIST)/%
	gzip -9 -n -c $< > $<.gz.tmp && mv $<.gz.tmp $<.gz
	sha256sum $< | cut -c1-64 > $<.gz.sha256

# The npm package (`npm pack dist/npm`): the loader, its modules, the types,
# both runtimes and wasm_exec.js, with the package.json of jsglue/loader.
# Plain names: the app's bundler hashes them into its own output.
NPM       := $(DIST)/npm
NPM_FILES := tabfence.d.ts tabfence-sw.d.ts wasm_exec.js tabfence.wasm tabfence-core.wasm $(notdir $(LOADER_MODULES))
npm: $(addprefix $(NPM)/,$(NPM_FILES) tabfence.js tabfence-sw.js package.json README.md LICENSE.wasm_exec) $(if $(wildcard LICENSE),$(NPM)/LICENSE)
$(NPM):
	mkdir -p $(NPM)
$(addprefix $(NPM)/,$(NPM_FILES)): $(NPM)/%: $(DIST)/% | $(NPM)
	cp $< $@
$(NPM)/tabfence.js $(NPM)/tabfence-sw.js: $(NPM)/%: jsglue/loader/% | $(NPM)
	cp $< $@
# wasm_exec.js is Go's, under Go's BSD license, which travels with it.
$(NPM)/LICENSE.wasm_exec: $(GOROOT)/LICENSE | $(NPM)
	cp $< $@
$(NPM)/package.json: jsglue/loader/package.npm.json | $(NPM)
	cp $< $@
$(NPM)/README.md $(NPM)/LICENSE: $(NPM)/%: % | $(NPM)
	cp $< $@

# Cheap when nothing changed: go install's cache.
wasmpack:
	GOBIN=$(BIN) $(GO) install ./cmd/wasmpack

$(DIST)/wasm_exec.js: $(GOROOT)/lib/wasm/wasm_exec.js | $(DIST)
	cp "$(GOROOT)/lib/wasm/wasm_exec.js" $@

# The served loader names its files with their content's hash as a query
# (./tabfence-fast.js?v=0123456789abcdef): the assets handler serves a name
# whose v matches the file as immutable, so a repeat visit revalidates the
# loader alone and takes the rest from the browser's cache. (The npm copy
# keeps plain names: bundlers hash them into their own output.)
VERSIONED := $(LOADER_MODULES) $(DIST)/wasm_exec.js $(DIST)/tabfence.wasm
$(DIST)/tabfence.js: jsglue/loader/tabfence.js $(VERSIONED) | $(DIST)
	$(call version,$(VERSIONED))
# The worker's module, likewise: its imports of the (versioned) loader and
# wasm_exec.js. A new loader is a new worker script, which the browser
# installs as a new version.
SW_VERSIONED := $(DIST)/tabfence.js $(DIST)/wasm_exec.js
$(DIST)/tabfence-sw.js: jsglue/loader/tabfence-sw.js $(SW_VERSIONED) | $(DIST)
	$(call version,$(SW_VERSIONED))
# version copies $< to $@ with each "./<name>" of the files $(1) made
# "./<name>?v=<the first 16 hex of its SHA-256>".
define version
	cp $< $@.tmp
	@for f in $(notdir $(1)); do \
	  h=$$(sha256sum $(DIST)/$$f | cut -c1-16); \
	  grep -q "\"\./$$f\"" $@.tmp || { echo "$<: no \"./$$f\" to version"; exit 1; }; \
	  sed -i "s|\"\./$$f\"|\"./$$f?v=$$h\"|g" $@.tmp; \
	done
	mv $@.tmp $@
endef

$(DIST)/tabfence.d.ts $(DIST)/tabfence-sw.d.ts: $(DIST)/%: jsglue/loader/% | $(DIST)
	cp $< $@

$(DIST)/tabfence-fast.js: jsglue/loader/core.js | $(DIST)
	cp $< $@
$(DIST)/tabfence-channel.js: channel/fast.js | $(DIST)
	cp $< $@
$(DIST)/tabfence-outbox.js: outbox/browser/append.js | $(DIST)
	cp $< $@
$(DIST)/tabfence-api.js: wasm/api.js | $(DIST)
	cp $< $@
$(DIST)/tabfence-idb.js: idb/fast.js | $(DIST)
	cp $< $@

## deps: everything the tests need that a fresh Debian machine lacks
deps: chromium firefox postgres wasmexec node typescript

# TypeScript from npm, for the check that the docs' snippets type-check
# against tabfence.d.ts (internal/outside); kept in ./.bin/node_modules.d (not a name on PATH).
TYPESCRIPT_VERSION := 7.0.2
NPM_DIR := $(BIN)/node_modules.d
TSC     := $(NPM_DIR)/node_modules/.bin/tsc
typescript: $(TSC)
$(TSC): | node
	mkdir -p $(NPM_DIR)
	npm install --prefix $(NPM_DIR) --no-audit --no-fund --silent typescript@$(TYPESCRIPT_VERSION)
	@touch $@

chromium:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Firefox ESR: the e2e suite runs its browser-independent tests in it too,
# over WebDriver BiDi (Debian's firefox-esr; the security suite has the
# current ESR).
firefox:
	@test -x $(FIREFOX) || { echo "installing Debian's firefox-esr"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq firefox-esr >/dev/null; }

# node and npm: the e2e test packs dist/npm, installs it with esbuild and
# Vite into a throwaway app and bundles it (npm's cache keeps it offline
# after the first run).
node:
	@command -v npm >/dev/null || { echo "installing Debian's nodejs and npm"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }

postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "installing Debian's postgresql"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

# brotli measures the download as a server would send it (make bench).
brotli:
	@command -v brotli >/dev/null || { echo "installing Debian's brotli"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq brotli >/dev/null; }

# wasmbrowsertest runs `GOOS=js GOARCH=wasm go test` binaries in Chromium;
# the go command finds go_js_wasm_exec on PATH: a script that packs the test
# binary as `make build` packs dist/ (wasmpack), then runs wasmbrowsertest.
# (It was a symlink to wasmbrowsertest: remove it before writing the script,
# or the write would go through the link into the binary.)
wasmexec: wasmpack $(BIN)/wasmbrowsertest
	@rm -f $(WASMEXEC)
	@printf '%s\n' '#!/bin/sh' '# written by make wasmexec: pack the test binary like dist/, then run it in Chromium' \
	  'd=$$(dirname "$$0")' '"$$d/wasmpack" "$$1" || exit 1' 'exec "$$d/wasmbrowsertest" "$$@"' > $(WASMEXEC)
	@chmod +x $(WASMEXEC)
$(BIN)/wasmbrowsertest:
	GOBIN=$(BIN) $(GO) install github.com/agnivade/wasmbrowsertest@v0.11.0

## test: every test — native, in-browser (wasm in Chromium), multi-tab e2e
test: deps build
	bash internal/testenv/with-postgres.sh $(MAKE) --no-print-directory test-native
	$(MAKE) --no-print-directory test-wasm
	$(MAKE) --no-print-directory test-e2e

test-native: typescript
	$(GO) vet ./...
	$(GO) run ./cmd/shape
	TABFENCE_TSC=$(TSC) $(GO) test -count=1 ./...

## test-types: the docs' TypeScript and JavaScript snippets against tabfence.d.ts (tsc --strict)
test-types: typescript
	TABFENCE_TSC=$(TSC) $(GO) test -count=1 -run 'TestTypeScript|TestOperationTypo|TestDTS' ./internal/outside/ ./wasm/

test-wasm: wasmexec chromium
	GOOS=js GOARCH=wasm $(GO) test $(WASM_GCFLAGS) -count=1 $(WASM_PKGS)
	GOOS=js GOARCH=wasm $(GO) test $(WASM_GCFLAGS) -count=1 -tags tabfence_core ./wasm/

# TABFENCE_BROWSERS=chromium (or firefox) runs the suite in one browser only.
test-e2e: build chromium firefox node
	$(GO) test -tags e2e -count=1 -timeout 45m ./e2e/...

## bench: figures — browser runtime vs raw JavaScript, sizes, memory, server throughput; rewrites docs/figures.md
bench: deps brotli build
	bash internal/testenv/with-postgres.sh $(GO) run ./cmd/bench $(BENCHFLAGS)

## shape: package, file and function sizes against their limits, and the import layering (exits 1 on a violation)
shape:
	$(GO) run ./cmd/shape

## demo: build and serve the demo on http://$(ADDR)/
demo: build
	$(GO) run ./cmd/tabfence serve --addr $(ADDR) --dist $(DIST)

clean:
	rm -rf $(DIST) $(BIN) bench-out
