# profinfer: build, run and test the OpenTelemetry Collector distribution.
#
#   make generate         regenerate internal/metadata, documentation.md and the bpf2go output
#   make build            build bin/otelcol-profinfer with ocb (downloads modules on first run)
#   make build-arm64      cross-build the distribution for linux/arm64 (build-amd64 likewise),
#                         into build/linux-ARCH/, where the container image takes it from
#   make run              build, then run the collector with config/otelcol.yaml (needs root)
#   make test             set up the test environment, build, then run every test (e2e tests
#                         need root), and print each step's and the slowest tests' minutes
#   make bench            measure the receiver's overhead on llama.cpp against a naive bpftrace
#                         peer, PAIRS (8) alternating rounds; report in build/bench.md (needs root)
#   make bench-report     time `profinfer report` on a 1 GB input (throughput, peak RSS)
#   make check-generated  fail if generated files differ from what is committed
#   make check-format     fail if committed Go code is not gofmt-formatted

GO    ?= go
TOOL  := $(GO) tool -modfile=tools/go.mod
DIST  := build/otelcol-profinfer
BIN   := bin/otelcol-profinfer
PAIRS ?= 8

# `go ... -e` keeps going past package-loading errors. GOFLAGS flags only reach
# the go commands that know them, so this touches just `go list` (which
# mdatagen runs in the repository root, where there is no Go package) and
# `go mod tidy` (which ocb runs; the tests of fileexporter and k8sattributesprocessor
# import otlpencodingextension and pkg/semconvtest, which the module proxy does not serve).
GOFLAGS_E := GOFLAGS="$$($(GO) env GOFLAGS) -e"

.PHONY: all generate build build-amd64 build-arm64 run testenv test bench bench-report check-generated check-format clean

all: build

generate:
	$(GOFLAGS_E) $(TOOL) mdatagen metadata.yaml
	$(GOFLAGS_E) $(TOOL) mdatagen viewexporter/metadata.yaml
	$(GOFLAGS_E) $(TOOL) mdatagen findingsconnector/metadata.yaml
	@# mdatagen also writes component tests for a Go package next to
	@# metadata.yaml; the repository root has none, so they cannot compile.
	rm -f generated_component_test.go generated_package_test.go
	$(GO) generate ./bpf/...
	scripts/vendor-web.sh
	gofmt -w internal/metadata viewexporter findingsconnector bpf

build:
	$(MAKE) build-$$($(GO) env GOARCH)
	cp build/linux-$$($(GO) env GOARCH)/otelcol-profinfer $(BIN)

# ocb builds with the GOARCH it is given; `go tool -n` builds ocb itself for this machine
# and prints its path, where `go tool` would build it for GOARCH too.
build-amd64 build-arm64: build-%:
	mkdir -p build/linux-$* bin
	GOOS=linux GOARCH=$* $(GOFLAGS_E) "$$($(TOOL) -n builder)" --config builder-config.yaml
	cp $(DIST)/otelcol-profinfer build/linux-$*/otelcol-profinfer

run: build
	$(BIN) --config config/otelcol.yaml

testenv:
	scripts/testenv.sh

# The test bench, both builds, then every package's tests, one package at a time; a
# timing summary at the end (scripts/test.sh).
test:
	GO=$(GO) scripts/test.sh

bench: testenv build
	command -v bpftrace >/dev/null || { apt-get update && apt-get install -y bpftrace; }
	$(GO) run ./internal/overhead/cmd/peer -pairs $(PAIRS) -o build/bench.md

bench-report:
	scripts/bench-report.sh

check-generated: generate
	@if [ -n "$$(git status --porcelain -- internal/metadata viewexporter findingsconnector bpf documentation.md internal/page/assets)" ]; then \
		echo "generated files differ from the committed ones; run 'make generate' and commit:"; \
		git status --porcelain -- internal/metadata viewexporter findingsconnector bpf documentation.md internal/page/assets; \
		exit 1; \
	fi

check-format:
	@unformatted=$$(git ls-files -z '*.go' | xargs -0 gofmt -l); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted; run gofmt -w:"; echo "$$unformatted"; exit 1; fi

clean:
	rm -rf build bin
