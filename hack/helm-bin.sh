#!/usr/bin/env bash
# Builds the Helm CLI pinned in hack/helm/go.mod (helm.sh/helm/v3 v3.22.0) into a cache outside the
# repo, like hack/kube-bins.sh does for the control plane: no binary can be downloaded here, so we
# build it from the Go module proxy; a second run finds it and returns at once.
#
# Prints the path of the helm binary on stdout (progress goes to stderr).
#
# Environment:
#   RETRYCAP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/retrycap)
set -euo pipefail

HELM_VERSION=3.22.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${RETRYCAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/retrycap}"
bin="$cache/helm-$HELM_VERSION"
mkdir -p "$bin"

# The version the module pins and the cache directory's name must agree.
if ! grep -qE "^\s*helm.sh/helm/v3 v$HELM_VERSION( |\$)" "$root/hack/helm/go.mod"; then
  echo "[helm-bin] hack/helm/go.mod does not require helm.sh/helm/v3 v$HELM_VERSION; update HELM_VERSION" >&2
  exit 1
fi

exec 9>"$bin/.lock"
flock 9

if [ ! -x "$bin/helm" ] || [ ! -s "$bin/helm" ]; then
  start=$(date +%s)
  echo "[helm-bin] building helm v$HELM_VERSION from the Go module proxy (first run on this machine: a few minutes)" >&2
  (cd "$root/hack/helm" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$bin/helm.tmp" helm.sh/helm/v3/cmd/helm)
  mv "$bin/helm.tmp" "$bin/helm"
  echo "[helm-bin] helm built in $(( $(date +%s) - start ))s" >&2
fi

echo "$bin/helm"
