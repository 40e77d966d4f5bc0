#!/usr/bin/env bash
# Builds the Prometheus server pinned in hack/prometheus/go.mod into a cache outside the repo,
# like hack/helm-bin.sh does for Helm: no binary can be downloaded here, so we build it from the
# Go module proxy; a second run finds it and returns at once. The observed-amplification test
# (internal/promquery) starts it to scrape real proxies.
#
# Prints the path of the prometheus binary on stdout (progress goes to stderr).
#
# Environment:
#   RETRYCAP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/retrycap)
set -euo pipefail

PROMETHEUS_VERSION=0.316.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${RETRYCAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/retrycap}"
bin="$cache/prometheus-$PROMETHEUS_VERSION"
mkdir -p "$bin"

# The version the module pins and the cache directory's name must agree.
if ! grep -qE "^\s*github.com/prometheus/prometheus v$PROMETHEUS_VERSION( |\$)" "$root/hack/prometheus/go.mod"; then
  echo "[prometheus-bin] hack/prometheus/go.mod does not require github.com/prometheus/prometheus v$PROMETHEUS_VERSION; update PROMETHEUS_VERSION" >&2
  exit 1
fi

exec 9>"$bin/.lock"
flock 9

if [ ! -x "$bin/prometheus" ] || [ ! -s "$bin/prometheus" ]; then
  start=$(date +%s)
  echo "[prometheus-bin] building prometheus v$PROMETHEUS_VERSION from the Go module proxy (first run on this machine: several minutes)" >&2
  # remove_all_sd leaves out every service discovery but the static one (the tests scrape static
  # loopback targets): a third fewer packages, none of the cloud SDKs. The web UI's assets are not
  # embedded (no builtinassets tag): the tests use the HTTP API only.
  (cd "$root/hack/prometheus" && CGO_ENABLED=0 go build -tags remove_all_sd -trimpath -ldflags='-s -w' -o "$bin/prometheus.tmp" github.com/prometheus/prometheus/cmd/prometheus)
  mv "$bin/prometheus.tmp" "$bin/prometheus"
  echo "[prometheus-bin] prometheus built in $(( $(date +%s) - start ))s" >&2
fi

echo "$bin/prometheus"
