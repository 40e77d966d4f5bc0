#!/usr/bin/env bash
# `make images`: the container images as docker-archive tarballs under bin/images/, built from the
# Go binaries without a daemon or a registry (hack/images, go-containerregistry). Prints one line
# per image on stdout, `<repository:tag> <tarball path relative to the repo root>`; progress goes
# to stderr. Load them into a cluster with `hack/node.sh load`, `kind load image-archive FILE`, or
# push them with `crane push FILE REPOSITORY:TAG`.
#
# Environment: TAG (default: the chart's appVersion), IMG_PREFIX (default: retrycap/).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TAG="${TAG:-$(awk '/^appVersion:/ {print $2}' charts/retrycap/Chart.yaml)}"
PREFIX="${IMG_PREFIX:-retrycap/}"
out=bin/images
mkdir -p "$out" bin/images/.bin
log() { printf '[images] %s\n' "$*" >&2; }

start=$SECONDS
log "compiling manager, retrycap-proxy, lab-app, pause (static, linux/amd64)"
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -ldflags='-s -w' -o "$out/.bin/manager" ./cmd/manager
go build -trimpath -ldflags='-s -w' -o "$out/.bin/retrycap-proxy" ./cmd/retrycap-proxy
go build -trimpath -ldflags='-s -w' -o "$out/.bin/lab-app" ./cmd/lab-app
(cd hack/images && go build -trimpath -ldflags='-s -w' -o "$ROOT/$out/.bin/pause" ./pause)
(cd hack/images && go build -o "$ROOT/$out/.bin/images" .)
log "compiled in $((SECONDS - start))s"

# image NAME FILE [SRC=DST...]: the same user as the Dockerfiles' distroless nonroot base.
image() {
  local ref=$1 file=$2
  shift 2
  "$out/.bin/images" -ref "$ref" -out "$file" "$@"
  echo "$ref $file"
}
image "${PREFIX}manager:$TAG" "$out/manager.tar" "$out/.bin/manager=/manager"
image "${PREFIX}retrycap-proxy:$TAG" "$out/retrycap-proxy.tar" "$out/.bin/retrycap-proxy=/retrycap-proxy"
image "${PREFIX}lab-app:$TAG" "$out/lab-app.tar" "$out/.bin/lab-app=/lab-app"
image "${PREFIX}node-pause:$TAG" "$out/node-pause.tar" "$out/.bin/pause=/pause"
log "images written in $((SECONDS - start))s"
