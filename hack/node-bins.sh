#!/usr/bin/env bash
# Builds the node's binaries that hack/node.sh runs beside kube-apiserver and etcd (hack/kube-bins.sh):
# kubelet, kube-proxy, kube-controller-manager and kube-scheduler from k8s.io/kubernetes v1.37.2, and
# CoreDNS from its Go module (hack/coredns, a module of its own), into the same cache as
# hack/kube-bins.sh. The Kubernetes commands are built from a module pinned exactly like
# kube-bins.sh's (same versions, same flags), so the Go build cache shares every package the API
# server already compiled; both scripts hold the same lock, so they never compile the same package
# twice at once. A second run finds the binaries and returns in well under a second.
#
# Prints the directory holding the binaries on stdout (progress goes to stderr).
#
# Environment:
#   RETRYCAP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/retrycap)
set -euo pipefail

KUBE_VERSION=1.37.2
STAGING_VERSION=0.37.2
COREDNS_VERSION=1.15.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${RETRYCAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/retrycap}"
bin="$cache/node-$KUBE_VERSION-coredns-$COREDNS_VERSION/bin"
build="$cache/build"
mkdir -p "$bin" "$build"

log() { printf '[node-bins] %s\n' "$*" >&2; }

have() { [ -x "$bin/$1" ] && [ -s "$bin/$1" ]; }

step() {
  local label=$1 start=$SECONDS pid
  shift
  log "$label"
  # The heartbeat closes the lock's descriptors: killed or orphaned, it must not hold the lock.
  ( exec 8>&- 9>&-; while sleep 30; do log "  ... still $label ($((SECONDS - start))s)"; done ) >&2 &
  pid=$!
  if "$@"; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; return 0; fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  return 1
}

export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0

cmds=(kubelet kube-proxy kube-controller-manager kube-scheduler)
missing=()
for c in "${cmds[@]}"; do have "$c" || missing+=("$c"); done

if [ "${#missing[@]}" -gt 0 ]; then
  # The lock hack/kube-bins.sh holds: one compile of k8s.io/kubernetes' packages at a time.
  exec 9>"$cache/.lock"
  flock 9
  mod="$build/kubernetes-node"
  if [ ! -s "$mod/go.sum" ]; then
    start=$(date +%s)
    rm -rf "$mod" && mkdir -p "$mod"
    {
      echo "module retrycap.local/nodebins"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes v$KUBE_VERSION"
    } >"$mod/go.mod"
    # As in hack/kube-bins.sh: each staging repo pinned to its published twin.
    (cd "$mod" && go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" >/dev/null)
    gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$KUBE_VERSION.mod"
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}' | while read -r repo; do
      (cd "$mod" && go mod edit -replace "$repo=$repo@v$STAGING_VERSION")
    done
    {
      echo '//go:build tools'
      echo
      echo 'package tools'
      echo
      echo 'import ('
      for c in "${cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
      echo ')'
    } >"$mod/tools.go"
    pkgs=()
    for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    step "resolving the node's modules" bash -c "cd '$mod' && { go mod tidy -e >/dev/null 2>&1 || true; } && go get ${pkgs[*]} >&2"
    log "modules resolved in $(( $(date +%s) - start ))s"
  fi
  # Versions stamped as a release build does: kubectl version and the node's kubeletVersion show
  # v1.37.2, not v0.0.0-master (which the API server's version skew checks would reject).
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
  for c in "${missing[@]}"; do
    start=$(date +%s)
    step "compiling $c v$KUBE_VERSION (first run on this machine: minutes)" \
      bash -c "cd '$mod' && go build -trimpath -ldflags='$ldflags' -o '$bin/$c.tmp' k8s.io/kubernetes/cmd/$c"
    mv "$bin/$c.tmp" "$bin/$c"
    log "$c built in $(( $(date +%s) - start ))s"
  done
fi

# The version hack/coredns pins and the cache directory's name must agree. Checked on every run,
# not only when the binary is missing: a check that only a fresh machine runs failed there unseen
# (go.mod's one-line `require module version` form did not match until the fifth session).
if ! grep -qE "^\s*(require\s+)?github.com/coredns/coredns v$COREDNS_VERSION( |\$)" "$root/hack/coredns/go.mod"; then
  log "hack/coredns/go.mod does not require github.com/coredns/coredns v$COREDNS_VERSION; update COREDNS_VERSION"
  exit 1
fi
if ! have coredns; then
  exec 8>"$bin/.coredns.lock"
  flock 8
  if ! have coredns; then
    start=$(date +%s)
    step "compiling CoreDNS v$COREDNS_VERSION (hack/coredns; first run on this machine: a few minutes)" \
      bash -c "cd '$root/hack/coredns' && GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o '$bin/coredns.tmp' ."
    mv "$bin/coredns.tmp" "$bin/coredns"
    log "coredns built in $(( $(date +%s) - start ))s"
  fi
fi

echo "$bin"
