# sharedos-run — build, test, lint, bench.
GO      ?= go
BIN     ?= bin/sharedos-run
PKGS    := ./...

.PHONY: build test lint bench fuzz clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/sharedos-run

# The full suite. Sandbox and end-to-end tests run for real as root.
test: build
	$(GO) test -count=1 -timeout 30m $(PKGS)

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

# Short fuzzing pass over every fuzz target (FUZZTIME each).
FUZZTIME ?= 60s
fuzz:
	$(GO) test ./canonjson/ -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=$(FUZZTIME)
	$(GO) test ./bridge/ -run='^$$' -fuzz=FuzzVerifyToken -fuzztime=$(FUZZTIME)
	$(GO) test ./policy/ -run='^$$' -fuzz=FuzzPathSegments -fuzztime=$(FUZZTIME)

clean:
	rm -rf bin
