#!/usr/bin/env bash
# Builds the Helm CLI pinned in hack/helm/go.mod (helm.sh/helm/v3 v3.22.0) into a cache outside the
# repo (hack/go-bin.sh), like hack/kube-bins.sh does for the control plane; a second run finds it
# and returns at once.
#
# Prints the path of the helm binary on stdout (progress goes to stderr).
#
# Environment:
#   RETRYCAP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/retrycap)
set -euo pipefail

HELM_VERSION=3.22.0

source "$(dirname "${BASH_SOURCE[0]}")/go-bin.sh"
go_bin helm "$HELM_VERSION" helm.sh/helm/v3 "a few minutes" helm.sh/helm/v3/cmd/helm
