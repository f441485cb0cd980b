# slaprobe. `make help` lists the targets; `make test` is what CI runs (.ci/run).

GO        ?= go
BIN       ?= bin/slaprobe
FUZZTIME  ?= 30s
BENCH_PKGS ?= ./prober/ ./...
DEMO_ARGS ?=

# Builds must not depend on git being usable (CI clones as another user, Docker has no .git):
# version data goes in through -ldflags instead.
export GOFLAGS := $(strip $(GOFLAGS) -buildvcs=false)

VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH     ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILD_USER ?= $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)
VERSION_PKG := github.com/prometheus/common/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) \
	-X $(VERSION_PKG).Branch=$(BRANCH) -X $(VERSION_PKG).BuildUser=$(BUILD_USER) \
	-X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

# Rule files are alerts/*.yml; promtool unit tests for them are alerts/*_test.yml.
RULE_TESTS := $(wildcard alerts/*_test.yml alerts/*_test.yaml)
RULE_FILES := $(filter-out $(RULE_TESTS),$(wildcard alerts/*.yml alerts/*.yaml))
AM_CONFIGS := $(wildcard deploy/alertmanager*.yml deploy/alertmanager*.yaml)

.DEFAULT_GOAL := build

.PHONY: help
help:
	@echo 'Targets:'
	@echo '  build       build $(BIN) (cgo on, for NVML)'
	@echo '  test        install what tests need if missing, then: go test -race ./..., checkrules, test-e2e'
	@echo '  test-deps   apt: prometheus (promtool), prometheus-alertmanager (amtool), chromium;'
	@echo '              build llm-d-inference-sim into .tools/bin (only when missing or re-pinned)'
	@echo '  test-short  go test ./... with nothing installed (tests needing a missing tool skip)'
	@echo '  test-e2e    run `slaprobe demo`, scrape it, check all four default scenarios and promtool check metrics'
	@echo '  lint        gofmt -l (must be empty) and go vet'
	@echo '  dashboards  regenerate dashboards/*.json from internal/dashgen (lint fails when they differ)'
	@echo '  rules       regenerate alerts/slaprobe.rules.yml and deploy/kubernetes/ from internal/alertgen'
	@echo '              (lint and go test ./internal/alertgen fail when they differ)'
	@echo '  checkrules  promtool check rules / test rules on alerts/, amtool check-config on deploy/'
	@echo '  bench       benchmarks, 5 runs each ($(BENCH_PKGS))'
	@echo '  fuzz        fuzz the stream decoder for $(FUZZTIME)'
	@echo '  demo        go run ./cmd/slaprobe demo'

.PHONY: build
build:
	@echo '==> build $(BIN) $(VERSION)'
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/slaprobe

.PHONY: test
test: export SLAPROBE_REQUIRE_DEPS := 1
test: test-deps
	@echo '==> go test -race ./...'
	CGO_ENABLED=1 $(GO) test -race -timeout 20m ./...
	@echo '==> dashboards against Grafana schema types (test-only module test/grafana)'
	cd test/grafana && $(GO) test ./...
	@$(MAKE) --no-print-directory checkrules
	@$(MAKE) --no-print-directory test-e2e
	@echo '==> make test: all passed'

.PHONY: test-deps
test-deps:
	@echo '==> test dependencies'
	@scripts/test-deps.sh all

.PHONY: test-short
test-short:
	@echo '==> go test ./... (no installs; tests needing a missing tool skip)'
	$(GO) test ./...

.PHONY: test-e2e
test-e2e:
	@echo '==> end-to-end: slaprobe demo'
	@scripts/e2e.sh

.PHONY: lint
lint:
	@echo '==> gofmt -l'
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*' -not -path './.tools/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@echo '==> go vet ./...'
	$(GO) vet ./...
	@$(MAKE) --no-print-directory dashboards && git diff --exit-code -- dashboards/
	@$(MAKE) --no-print-directory rules && git diff --exit-code -- alerts/ deploy/kubernetes/

# The rule files are generated: edit internal/alertgen, then run this.
.PHONY: rules
rules:
	@echo '==> alerts/slaprobe.rules.yml and deploy/kubernetes/ from internal/alertgen'
	$(GO) run ./internal/alertgen/cmd/alertgen

.PHONY: dashboards
dashboards:
	@echo '==> dashboards/ from internal/dashgen'
	$(GO) run ./internal/dashgen/cmd/dashgen -out dashboards/

.PHONY: checkrules
checkrules:
ifeq ($(strip $(RULE_FILES)),)
	@echo '==> checkrules: no rule files in alerts/, nothing to check'
else
	@echo '==> promtool check rules $(RULE_FILES)'
	promtool check rules $(RULE_FILES)
endif
ifneq ($(strip $(RULE_TESTS)),)
	@echo '==> promtool test rules $(RULE_TESTS)'
	promtool test rules $(RULE_TESTS)
endif
ifneq ($(strip $(AM_CONFIGS)),)
	@echo '==> amtool check-config $(AM_CONFIGS)'
	amtool check-config $(AM_CONFIGS)
endif

.PHONY: bench
bench:
	@echo '==> benchmarks ($(BENCH_PKGS))'
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(BENCH_PKGS)

.PHONY: fuzz
fuzz:
	@echo '==> fuzz FuzzStreamDecoder for $(FUZZTIME)'
	$(GO) test -run '^$$' -fuzz '^FuzzStreamDecoder$$' -fuzztime $(FUZZTIME) ./prober/

.PHONY: demo
demo:
	$(GO) run ./cmd/slaprobe demo $(DEMO_ARGS)

.PHONY: clean
clean:
	rm -rf bin/

# The simulator takes minutes to build; only this removes it.
.PHONY: clean-tools
clean-tools:
	rm -rf .tools/
