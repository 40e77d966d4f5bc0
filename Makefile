# retrycap Makefile. Target names follow kubebuilder's conventions.
#
# The control-plane binaries (kube-apiserver, etcd, kubectl) are built from source by
# hack/kube-bins.sh into ~/.cache/retrycap (minutes on a fresh machine, seconds afterwards).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
CONTROLLER_GEN ?= $(GO) tool controller-gen
GOLANGCI_LINT ?= $(GO) tool -modfile=hack/tools/go.mod golangci-lint
KUBE_BINS = hack/kube-bins.sh
# Resolved lazily: only targets that need a control plane build it.
KUBEBUILDER_ASSETS_CMD = KUBEBUILDER_ASSETS="$$(bash $(KUBE_BINS))"
IMG ?= retrycap/manager:v0.1.0
PROXY_IMG ?= retrycap/retrycap-proxy:v0.1.0
GO_TEST_FLAGS ?= -count=1 -timeout=40m

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRD and the RBAC role from kubebuilder markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	# kubectl explain prints every line break controller-gen keeps from the Go comments: join the
	# lines of each paragraph as Kubernetes' own generators do (hack/crddoc).
	$(GO) run ./hack/crddoc config/crd/bases/*.yaml
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./internal/controller/... paths=./internal/webhook/... output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail if generated code or manifests are not checked in up to date.
	@if [ -n "$$(git status --porcelain -- api config)" ]; then \
	  echo "generated files are out of date; run 'make generate manifests' and commit:"; \
	  git status --porcelain -- api config; git --no-pager diff -- api config | head -50; exit 1; fi

.PHONY: fmt
fmt: ## Run gofmt over the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: verify-fmt
verify-fmt: ## Fail if gofmt would change a file.
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: ## Run golangci-lint (v2, pinned in hack/tools/go.mod).
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: kube-bins
kube-bins: ## Build (or find in the cache) kube-apiserver, etcd and kubectl; print their directory.
	@bash $(KUBE_BINS)

.PHONY: helm-bin
helm-bin: ## Build (or find in the cache) the helm pinned in hack/helm/go.mod; print its path.
	@bash hack/helm-bin.sh

.PHONY: prometheus-bin
prometheus-bin: ## Build (or find in the cache) the Prometheus server pinned in hack/prometheus/go.mod; print its path.
	@bash hack/prometheus-bin.sh

.PHONY: test
test: verify-fmt verify-generated vet lint kube-bins helm-bin prometheus-bin node-bins python-deps ## Run every check and every test (unit, envtest, e2e, the e2e on a real node).
	$(KUBEBUILDER_ASSETS_CMD) $(GO) test $(GO_TEST_FLAGS) ./...
	# The proxy's tests once more on its other engine (--engine=goroutine): the tests that can
	# reach the engine flag (TestMain lists them, internal/proxy/engineflag_test.go).
	$(GO) test $(GO_TEST_FLAGS) ./internal/proxy -args -engine=goroutine
	# The alerts and the Grafana dashboard against the metrics the code exports (a module of its
	# own: Prometheus' would move the product's Kubernetes versions).
	cd hack/monitoring && $(GO) test $(GO_TEST_FLAGS) ./...
	# The PodMonitor relabelings docs/observe.md documents, through Prometheus' own relabel code.
	cd hack/prometheus && $(GO) test $(GO_TEST_FLAGS) ./...
	# The e2e suite on a real node (hack/node.sh, test/node): last and alone on the cores.
	$(MAKE) --no-print-directory test-node

.PHONY: test-unit
test-unit: prometheus-bin python-deps ## Run the tests that need no control plane.
	$(GO) test $(GO_TEST_FLAGS) $$($(GO) list ./... | grep -v -e /internal/controller -e /internal/webhook -e /internal/mesh/crds -e /test/e2e)

.PHONY: test-e2e
test-e2e: kube-bins ## Run the end-to-end tests (real API server, manager, kubectl).
	$(KUBEBUILDER_ASSETS_CMD) $(GO) test $(GO_TEST_FLAGS) ./test/e2e/...

.PHONY: bench
bench: ## Run the Go benchmarks (figures go in docs/benchmarks.md).
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

.PHONY: python-deps
python-deps: ## Install Debian's python3, python3-requests and python3-grpcio (the proxy's Python client tests) when missing.
	@bash hack/python-deps.sh

.PHONY: node-bins
node-bins: ## Build (or find in the cache) kubelet, kube-proxy, kube-controller-manager, kube-scheduler and CoreDNS; print their directory.
	@bash hack/node-bins.sh

.PHONY: test-node
test-node: kube-bins helm-bin node-bins ## The e2e suite on a real single-node cluster (hack/node.sh; root, cgroups; skipped with the reason elsewhere).
	RETRYCAP_NODE_E2E=1 $(GO) test -count=1 -timeout=60m -v ./test/node/

##@ Build

# The kubectl plugin is its own binary, not a link to retrycap: the full CLI carries the storm lab
# and the demo, which link the embedded control plane (envtest), the manager and gonum/plot. The
# plugin has only analyze, graph, observe and discover (the same code, internal/cli), so what users
# put on their PATH stays small.
.PHONY: build
build: ## Build the manager, the proxy, the CLI and the kubectl plugin into bin/.
	CGO_ENABLED=0 $(GO) build -o bin/manager ./cmd/manager
	CGO_ENABLED=0 $(GO) build -o bin/retrycap-proxy ./cmd/retrycap-proxy
	CGO_ENABLED=0 $(GO) build -o bin/retrycap ./cmd/retrycap
	CGO_ENABLED=0 $(GO) build -o bin/kubectl-retrycap ./cmd/kubectl-retrycap

.PHONY: run
run: ## Run the manager against the current kubeconfig, webhooks off.
	$(GO) run ./cmd/manager --enable-webhooks=false

.PHONY: demo
# Built, then run (not `go run`): `go run` exits 1 when Ctrl-C reaches it, whatever the demo
# returns, so a clean stop ended in "make: *** [demo] Error 1". bin/retrycap is left for the
# README's next steps (`bin/retrycap analyze -k config/samples`), and the storm lab's chart as
# bin/storm.svg (one file, overwritten by the next run).
# The control-plane binaries first (a fresh machine builds them), their directory not printed: it
# was the first line a user saw, a bare path.
demo: ## The main job on an embedded control plane (real kube-apiserver + etcd); Ctrl-C to stop.
	@bash $(KUBE_BINS) >/dev/null
	CGO_ENABLED=0 $(GO) build -o bin/retrycap ./cmd/retrycap
	$(KUBEBUILDER_ASSETS_CMD) bin/retrycap demo --chart bin/storm.svg

.PHONY: images
images: ## Image tarballs (manager, proxy, lab app, node pause) under bin/images/, no daemon or registry; one `<ref> <tarball>` line each.
	@bash hack/images.sh

.PHONY: demo-node
# hack/demo-node.sh builds (or finds) kubectl, helm and the node's binaries itself (hack/node.sh up
# for the node's): as prerequisites, their three cache paths were its first lines of output.
demo-node: ## The demo's story on a real single-node cluster (hack/node.sh); leaves it running.
	@bash hack/demo-node.sh

.PHONY: docker-build
docker-build: ## Build the images (needs a Docker engine; none runs on the development machines).
	docker build -f Dockerfile.manager -t $(IMG) .
	docker build -f Dockerfile.proxy -t $(PROXY_IMG) .

##@ Deployment

KUBECTL ?= kubectl

.PHONY: install
install: ## Install the CRD into the cluster of the current kubeconfig.
	$(KUBECTL) apply -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRD.
	$(KUBECTL) delete -k config/crd

.PHONY: deploy
deploy: ## Install everything (CRD, RBAC, manager, webhooks, cert-manager objects). Needs cert-manager.
	$(KUBECTL) apply -k config/default

.PHONY: undeploy
undeploy: ## Remove everything deploy installed.
	$(KUBECTL) delete -k config/default
