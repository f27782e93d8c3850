# skiff: `make` builds bin/skiff; `make test` runs every test (what CI runs).
GO        ?= go
PKGS      := ./...
# Packages with concurrency, run again under the race detector.
RACE_PKGS := ./internal/storage/... ./internal/apiserver/... ./internal/kubelet/... ./internal/scheduler/... ./internal/hugepages/ ./internal/gcheadroom/ ./internal/leaderwork/ ./internal/workerpool/ ./internal/journey/ ./internal/dashboard/
# A count, not a duration: with a duration Go 1.26's fuzz coordinator can
# fail a target with "context deadline exceeded" when the time runs out
# (golang/go#75804, fixed in Go 1.27). 20000 runs take 1-20 s a target here.
FUZZTIME  ?= 20000x
# The Go runtime gives memory back to the kernel with MADV_FREE (reclaimed
# when the machine needs it) instead of MADV_DONTNEED (unmapped at once):
# 15-20% less CPU when scheduling 10,000 pods (docs/benchmarks.md); RSS
# drops only under memory pressure. The runtime reads this setting only at
# start and //go:debug does not take it, hence the linker.
LDFLAGS   := -X=runtime.godebugDefault=madvdontneed=0
# The Kubernetes code linked in reports the release in go.mod, as upstream's
# builds set it (hack/lib/version.sh): the embedded kubectl's client version
# (`skiff kubectl version`, component-base) and client-go's user agent;
# internal/kubeversion has the same for the server (LinkerFlags).
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ { print $$2; exit }' $(dir $(lastword $(MAKEFILE_LIST)))go.mod)
KUBE_VERSION_PKGS := k8s.io/component-base/version k8s.io/client-go/pkg/version
LDFLAGS   += $(foreach pkg,$(KUBE_VERSION_PKGS),-X=$(pkg).gitVersion=$(KUBE_VERSION)+skiff \
	-X=$(pkg).gitMajor=$(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION)))) \
	-X=$(pkg).gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))))

.PHONY: all build test vet unit race fuzz e2e deps run clean

all: build

build:
	$(GO) build -ldflags='$(LDFLAGS)' -o bin/skiff ./cmd/skiff

deps:
	./hack/install-deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)

# client-go's cache mutation detector (as upstream's integration tests run):
# a test panics if anything changes an informer's object, which the server's
# direct informers share with the watch cache (docs/architecture.md).
unit:
	KUBE_CACHE_MUTATION_DETECTOR=true $(GO) test -count=1 -ldflags='$(LDFLAGS)' $$($(GO) list ./... | grep -v /test/e2e)

race:
	$(GO) test -count=1 -race $(RACE_PKGS)

# Every fuzz target, briefly: a panic fails the run.
fuzz:
	@for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' internal | xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/:func /:/'); do \
		file=$${spec%%:*}; target=$${spec##*:}; dir=./$$(dirname $$file); \
		echo "fuzz $$dir $$target"; \
		$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$dir || exit 1; \
	done

e2e: build
	SKIFF_BINARY=$(CURDIR)/bin/skiff $(GO) test -count=1 -timeout 30m ./test/e2e/...

test: deps vet unit race fuzz e2e

# run installs the system packages first (seconds), then builds: the first
# build downloads and compiles Kubernetes' modules, which takes minutes.
run:
	@echo "skiff: checking system packages (containerd, runc, CNI plugins, iptables, nftables)..."
	@./hack/install-deps.sh
	@if [ -x bin/skiff ]; then echo "skiff: building bin/skiff (under a minute when little changed)..."; \
	else echo "skiff: building bin/skiff; the first build downloads and compiles Kubernetes' Go modules, about 10 minutes on 2 CPUs..."; fi
	$(GO) build -ldflags='$(LDFLAGS)' -o bin/skiff ./cmd/skiff
	@echo "skiff: built; starting the server (it is ready when it prints 'skiff server is running')"
	./bin/skiff server

clean:
	rm -rf bin
