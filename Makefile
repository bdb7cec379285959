# sharedos-run — build, test, lint, bench.
GO      ?= go
BIN     ?= bin/sharedos-run
PKGS    := ./...

.PHONY: build demo deps test lint bench fuzz clean

# urfave_cli_no_docs leaves out urfave/cli's man-page and Markdown generators (and
# blackfriday with them), which nothing here uses: their package initialisers ran at
# every start of the binary, twice per sandboxed run (launcher and stub).
GOTAGS  ?= urfave_cli_no_docs

build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags $(GOTAGS) -o $(BIN) ./cmd/sharedos-run

# What works end to end today: the catalogue, and a command in the sandbox acting
# only through the bridge (needs root).
demo:
	scripts/demo.sh

# Test dependencies outside Go: the pinned MCP TypeScript SDK (interop tests).
deps:
	scripts/install-mcp-sdk.sh

# The full suite. Sandbox and end-to-end tests run for real as root.
test: build
	$(GO) test -count=1 -timeout 30m $(PKGS)

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

# Short fuzzing pass over every fuzz target (FUZZTIME each). A count (N x) rather
# than a duration sidesteps Go 1.26's fuzz-coordinator deadline race, which reports
# "context deadline exceeded" at the end of a timed run without any finding.
FUZZTIME ?= 500000x
fuzz:
	$(GO) test ./canonjson/ -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=$(FUZZTIME)
	$(GO) test ./bridge/ -run='^$$' -fuzz=FuzzVerifyToken -fuzztime=$(FUZZTIME)
	$(GO) test ./tools/files/ -run='^$$' -fuzz=FuzzPathSegments -fuzztime=$(FUZZTIME)
	$(GO) test ./bridge/ -run='^$$' -fuzz=FuzzHandler -fuzztime=$(FUZZTIME)

clean:
	rm -rf bin
