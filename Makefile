# slaprobe. `make help` lists the targets; `make test` is what CI runs (.ci/run).

GO        ?= go
BIN       ?= bin/slaprobe
FUZZTIME  ?= 30s
# make test fuzzes each target this long (seed corpora: */testdata/fuzz/).
# fuzz-short bounds each target by a count of executions, not by time: Go
# 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when a loaded machine's worker misses the -fuzztime deadline
# (go.dev/issue/75804, fixed in Go 1.27). A count only runs slower there.
# FUZZTIME_SHORT=5m (or any -fuzztime value) overrides every target's count.
FUZZTIME_SHORT ?=
# go test's count flag for the test modules run from here; make test passes none (go test's cache
# may serve an unchanged package) unless TEST_FRESH=1.
TEST_COUNT ?= -count=1
FUZZ_TARGETS := ./prober/:FuzzStreamDecoder:30000x ./prober/:FuzzTypedStreamDecoder:20000x ./internal/config/:FuzzLoadBytes:10000x
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
	@echo '  test        scripts/test.sh: install what tests need if missing, then every test, in timed stages'
	@echo '  test-deps   apt: prometheus (promtool), prometheus-alertmanager (amtool), chromium;'
	@echo '              build llm-d-inference-sim, ollama and tinymodel into .tools/bin (only when missing or re-pinned)'
	@echo '  test-short  go test ./... with nothing installed (tests needing a missing tool skip)'
	@echo '  test-deploy go test in test/deploy (its own module): Dockerfile, compose, Helm, manifests, systemd, rollout templates'
	@echo '  manifests   regenerate deploy/kubernetes/*.yaml from the Helm chart (test-deploy fails when they differ)'
	@echo '  test-e2e    run `slaprobe demo`, scrape it, check all four default scenarios and promtool check metrics'
	@echo '  lint        gofmt -l (must be empty) and go vet'
	@echo '  dashboards  regenerate dashboards/*.json from internal/dashgen (lint fails when they differ)'
	@echo '  rules       regenerate alerts/slaprobe.rules.yml and deploy/kubernetes/ from internal/alertgen'
	@echo '              (lint and go test ./internal/alertgen fail when they differ)'
	@echo '  checkrules  promtool check rules / test rules on alerts/, amtool check-config on deploy/'
	@echo '  bench       benchmarks, 5 runs each ($(BENCH_PKGS))'
	@echo '  fuzz        fuzz the stream decoder for $(FUZZTIME)'
	@echo '  fuzz-short  fuzz the stream decoders (30000 runs chat and completions, 20000 responses and messages) and the config parser (10000 runs); part of test'
	@echo '  soak        the 30-minute soak (SLAPROBE_SOAK=1), figures in docs/reliability.md'
	@echo '  attack      the attack suite (TestAttack*): /probe, hostile servers, redirects, secrets, the listener, cross-site posts, config'
	@echo '  flood       a minute of floods on the OTLP receivers (SLAPROBE_FLOOD=1), figures in docs/reliability.md'
	@echo '  demo        go run ./cmd/slaprobe demo'

.PHONY: build
build:
	@echo '==> build $(BIN) $(VERSION)'
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/slaprobe

# scripts/test.sh runs the stages (tool builds, compilation, go test -race ./..., promtool, the test
# modules, the end-to-end checks), each as soon as what it needs is ready, then the timing checks on
# quiet cores; it prints how long each stage took. TEST_SERIAL=1 runs them one after the other.
# go test's cache serves what passed for the same code, tree and tools; TEST_FRESH=1 runs all again.
.PHONY: test
test:
	@scripts/test.sh

# test/deploy is a module of its own (Helm, Kubernetes, compose-go, BuildKit stay out of go.mod):
# `go test ./...` at the root does not descend into it.
.PHONY: test-deploy
test-deploy:
	@echo '==> test/deploy: Dockerfile, compose, Helm chart and manifests, systemd unit'
	cd test/deploy && CGO_ENABLED=1 $(GO) test $(TEST_COUNT) -timeout 15m ./...

# deploy/kubernetes/*.yaml are rendered from the Helm chart; test-deploy fails when they drift.
.PHONY: manifests
manifests:
	@echo '==> deploy/kubernetes/ from deploy/helm/slaprobe'
	cd test/deploy && $(GO) test -count=1 -run '^TestManifests$$' . -update

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
	cd test/deploy && $(GO) vet ./...
	@$(MAKE) --no-print-directory dashboards && git diff --exit-code -- dashboards/
	@$(MAKE) --no-print-directory rules && git diff --exit-code -- alerts/ deploy/kubernetes/

# The rule files are generated: edit internal/alertgen, then run this. The chart embeds the rule
# file, so the rendered manifests follow.
.PHONY: rules
rules:
	@echo '==> alerts/slaprobe.rules.yml and deploy/kubernetes/ from internal/alertgen'
	$(GO) run ./internal/alertgen/cmd/alertgen
	@$(MAKE) --no-print-directory manifests

.PHONY: dashboards
dashboards:
	@echo '==> dashboards/ from internal/dashgen'
	$(GO) run ./internal/dashgen/cmd/dashgen -out dashboards/

.PHONY: checkrules
checkrules:
	@for c in promtool:prometheus amtool:prometheus-alertmanager; do \
		command -v $${c%%:*} >/dev/null 2>&1 || { echo "$${c%%:*} not found: run \`make test-deps\` (Debian package $${c#*:}; .tools/apt-missing says what to do where apt cannot install it)" >&2; exit 1; }; \
	done
ifeq ($(strip $(RULE_FILES)),)
	@echo '==> checkrules: no rule files in alerts/, nothing to check'
else
	@echo '==> promtool check rules $(RULE_FILES)'
	promtool check rules $(RULE_FILES)
endif
ifneq ($(strip $(RULE_TESTS)),)
	@echo '==> promtool test rules $(RULE_TESTS) (one process a file, at once)'
	@tmp=$$(mktemp -d); pids=; \
	for f in $(RULE_TESTS); do promtool test rules $$f >$$tmp/$$(basename $$f).log 2>&1 & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; \
	cat $$tmp/*.log; rm -rf $$tmp; exit $$rc
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

# A new failing input lands in the package's testdata/fuzz/ and fails every
# later go test until fixed: commit it with the fix.
.PHONY: fuzz-short
fuzz-short:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${rest#*:}; \
		if [ -n "$(FUZZTIME_SHORT)" ]; then budget=$(FUZZTIME_SHORT); fi; \
		echo "==> fuzz $$name ($$pkg) for $$budget"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget -parallel 2 $$pkg || exit 1; \
	done

# The 30-minute soak (docs/reliability.md): niced, so a shared machine stays usable.
SOAK_DURATION ?= 30m
.PHONY: soak
soak:
	SLAPROBE_SOAK=1 SLAPROBE_SOAK_DURATION=$(SOAK_DURATION) SLAPROBE_SOAK_OUT=$(CURDIR)/docs/reliability \
		nice -n 10 $(GO) test ./cmd/slaprobe -run '^TestSoak$$' -count=1 -timeout 60m -v

# The attack suite (docs/reliability.md): every test named TestAttack* drives one door against a
# running slaprobe and, where it needs one, a hostile server. They are part of make test too.
.PHONY: attack
attack:
	$(GO) test ./cmd/slaprobe -run '^TestAttack' -count=1 -timeout 20m -v

# A minute of floods on slaprobe's OTLP receivers (docs/reliability.md), niced.
.PHONY: flood
flood:
	SLAPROBE_FLOOD=1 nice -n 10 $(GO) test ./cmd/slaprobe -run '^TestFlood$$' -count=1 -timeout 10m -v

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
