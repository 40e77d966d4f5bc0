#!/usr/bin/env bash
# Builds the real control-plane binaries that envtest, `make demo` and the e2e tests run:
# kube-apiserver and kubectl (k8s.io/kubernetes v1.37.2) and etcd (go.etcd.io/etcd/server/v3 v3.6.x),
# from the Go module proxy, into a cache outside the repo. No binary can be downloaded here, so we
# build them; a second run finds them and returns in well under a second.
#
# Prints the directory to use as KUBEBUILDER_ASSETS on stdout (progress goes to stderr).
#
# Environment:
#   RETRYCAP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/retrycap)
set -euo pipefail

KUBE_VERSION=1.37.2
STAGING_VERSION=0.37.2
ETCD_VERSION=3.6.16

cache="${RETRYCAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/retrycap}"
bin="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
build="$cache/build"
mkdir -p "$bin" "$build"

log() { printf '[kube-bins] %s\n' "$*" >&2; }

# One lock so that concurrent `make test` and `make demo` do not build twice.
exec 9>"$cache/.lock"
flock 9

have() { [ -x "$bin/$1" ] && [ -s "$bin/$1" ]; }

# step LABEL CMD...: runs a long step with a heartbeat line every 20 s, so a first run that
# compiles for minutes shows it is alive and how long it has taken.
step() {
  local label=$1 start=$SECONDS pid
  shift
  log "$label"
  # stdout of the heartbeat goes to stderr too: a caller capturing stdout must not wait for it.
  ( while sleep 20; do log "  ... still $label ($((SECONDS - start))s)"; done ) >&2 &
  pid=$!
  if "$@"; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; return 0; fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  return 1
}

export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0

if ! have kube-apiserver || ! have kubectl; then
  start=$(date +%s)
  log "building kube-apiserver and kubectl v$KUBE_VERSION from the Go module proxy (first run on this machine: several minutes)"
  mod="$build/kubernetes"
  rm -rf "$mod" && mkdir -p "$mod"
  {
    echo "module retrycap.local/kubebins"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v$KUBE_VERSION"
  } >"$mod/go.mod"
  # k8s.io/kubernetes replaces every staging repo with ./staging; outside its tree each one must be
  # pinned to its published twin, or the module graph cannot resolve.
  (cd "$mod" && go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" >/dev/null)
  gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$KUBE_VERSION.mod"
  grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}' | while read -r repo; do
    (cd "$mod" && go mod edit -replace "$repo=$repo@v$STAGING_VERSION")
  done
  cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  step "resolving and downloading modules" bash -c "cd '$mod' && { go mod tidy -e >/dev/null 2>&1 || true; } && go get k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl >&2"
  step "compiling kube-apiserver" bash -c "cd '$mod' && go build -trimpath -ldflags='-s -w' -o '$bin/kube-apiserver.tmp' k8s.io/kubernetes/cmd/kube-apiserver"
  mv "$bin/kube-apiserver.tmp" "$bin/kube-apiserver"
  step "compiling kubectl" bash -c "cd '$mod' && go build -trimpath -ldflags='-s -w' -o '$bin/kubectl.tmp' k8s.io/kubernetes/cmd/kubectl"
  mv "$bin/kubectl.tmp" "$bin/kubectl"
  log "kube-apiserver and kubectl built in $(( $(date +%s) - start ))s"
fi

if ! have etcd; then
  start=$(date +%s)
  log "building etcd v$ETCD_VERSION from the Go module proxy (a module of its own: sharing one would move the Kubernetes versions)"
  mod="$build/etcd"
  rm -rf "$mod" && mkdir -p "$mod"
  {
    echo "module retrycap.local/etcdbin"
    echo
    echo "go 1.26"
    echo
    echo "require go.etcd.io/etcd/server/v3 v$ETCD_VERSION"
  } >"$mod/go.mod"
  cat >"$mod/main.go" <<'GO'
// Command etcd is etcd's own entry point, built from the server module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  step "resolving and downloading etcd's modules" bash -c "cd '$mod' && go mod tidy >&2"
  step "compiling etcd" bash -c "cd '$mod' && go build -trimpath -ldflags='-s -w' -o '$bin/etcd.tmp' ."
  mv "$bin/etcd.tmp" "$bin/etcd"
  log "etcd built in $(( $(date +%s) - start ))s"
fi

echo "$bin"
