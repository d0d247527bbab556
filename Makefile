# KECE judge pool. `make demo` runs the main job end to end; `make test` runs all tests.
# Both work on a fresh Debian 12 machine as root: they install and start what they need.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED ?= 1

.PHONY: all build release quickstart test test-go deps deps-mysql deps-docker deps-browser images demo generate check-generate lint bench clean stop diagrams screenshots

all: build

# Every binary reports this version (--version, kece-node heartbeats, admin
# node views). Without git it falls back to the VCS data Go records, or "dev".
# This is the one stamp: telemetry's kece_build_info reads the same variable.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/kece-oj/kece/internal/buildinfo.version=$(VERSION)
BINDIR ?= bin

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BINDIR)/ ./cmd/...

# Release tarballs: dist/kece-$(VERSION)-linux-{amd64,arm64}.tar.gz (static
# binaries + units, env examples, Compose projects, nginx example) and
# dist/SHA256SUMS. VERSION must look like vX.Y.Z.
DIST ?= dist
release:
	DIST=$(DIST) scripts/release.sh $(VERSION)

# Images kece/kece-control and kece/kece-node tagged $(VERSION) and latest,
# built here without a registry (static host binaries on scratch / the
# debootstrap base), saved to dist/*-image-*.tar.gz (docker load -i).
images:
	DIST=$(DIST) scripts/images.sh $(VERSION)

# Try KECE with Compose on this machine (deploy/compose/quickstart; not for
# production): images, sandbox images of cpp and python, then up.sh, which
# prints KECE=… TOKEN=… for the curl session of docs/business.md.
quickstart: images
	deploy/images/build-local.sh cpp python
	deploy/compose/quickstart/up.sh

# Private MariaDB instances (control plane + judge server stand-in).
deps-mysql:
	scripts/mariadb.sh start control
	scripts/mariadb.sh start judge

# Docker Engine + locally built runtime images (no registry is reachable).
deps-docker:
	@if [ -x scripts/docker.sh ]; then scripts/docker.sh start; fi
	@if [ -x deploy/images/build-local.sh ]; then deploy/images/build-local.sh; fi

# Headless Chromium (Debian's package) for the console's browser tests.
deps-browser:
	scripts/chromium.sh install

deps: deps-mysql deps-docker deps-browser

test: deps lint test-go

test-go:
	$(GO) test -race -count=1 -timeout 30m ./...

generate:
	$(GO) generate ./...

# Fails when regenerated code differs from what is committed.
check-generate: generate
	@git diff --exit-code -- contracts || { echo "make generate changed committed code: run it and commit"; exit 1; }

# Lint tools are pinned and installed from the module proxy into bin/tools,
# so a fresh machine (CI) gets the same versions.
STATICCHECK_VERSION ?= v0.8.2
DEADCODE_VERSION ?= v0.52.0
TOOLS := $(CURDIR)/bin/tools

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(TOOLS)/deadcode:
	GOBIN=$(TOOLS) $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)

lint: $(TOOLS)/staticcheck $(TOOLS)/deadcode
	@out=$$(gofmt -l $$(git ls-files '*.go' ; git ls-files --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	@# deadcode -test: code no binary and no test reaches is dead.
	@out=$$($(TOOLS)/deadcode -test ./...); \
	  if [ -n "$$out" ]; then echo "dead code:"; echo "$$out"; exit 1; fi

bench: deps build
	bin/kece-bench all

# The main job end to end: control plane, one node per pool, verify/enable,
# publish, enqueue, verdicts, settlement events (see cmd/kece-demo).
demo: deps build
	bin/kece-demo

# The console screenshots shown in the README (docs/console/*.png), taken
# from a populated system: the demo's submissions judged in every pool by
# real kece-node processes, then a rejudge, a draining node and a
# dead-lettered settlement event (cmd/internal/browsertest/screens_test.go).
screenshots: deps-mysql deps-docker deps-browser
	rm -f docs/console/*.png
	KECE_SCREENSHOT_DIR=$(CURDIR)/docs/console KECE_REQUIRE_BROWSER=1 KECE_REQUIRE_MYSQL=1 KECE_REQUIRE_DOCKER=1 \
	  $(GO) test -count=1 -timeout 20m -run TestConsoleScreenshotsPopulated ./cmd/internal/browsertest/

# Architecture and state-machine figures: docs/diagrams/*.dot → .svg/.png
# (Graphviz from Debian, installed by the script when missing).
diagrams:
	scripts/diagrams.sh

stop:
	-scripts/mariadb.sh stop control
	-scripts/mariadb.sh stop judge
	-@if [ -x scripts/docker.sh ]; then scripts/docker.sh stop; fi

clean:
	rm -rf bin dist
