#!/usr/bin/env bash
# Builds the Prometheus server pinned in hack/prometheus/go.mod into a cache outside the repo
# (hack/go-bin.sh, as hack/helm-bin.sh does for Helm); a second run finds it and returns at once.
# The observed-amplification test (internal/promquery) starts it to scrape real proxies.
#
# Prints the path of the prometheus binary on stdout (progress goes to stderr).
#
# Environment:
#   RETRYCAP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/retrycap)
set -euo pipefail

PROMETHEUS_VERSION=0.316.0

source "$(dirname "${BASH_SOURCE[0]}")/go-bin.sh"
# remove_all_sd leaves out every service discovery but the static one (the tests scrape static
# loopback targets): a third fewer packages, none of the cloud SDKs. The web UI's assets are not
# embedded (no builtinassets tag): the tests use the HTTP API only.
go_bin prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus "several minutes" \
  github.com/prometheus/prometheus/cmd/prometheus -tags remove_all_sd
