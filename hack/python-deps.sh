#!/usr/bin/env bash
# hack/python-deps.sh: Debian's Python and the two client libraries the proxy's Python client
# tests drive (internal/proxy/pyclient_test.go): python3 (http.client, urllib.request),
# python3-requests (requests, with Debian's urllib3) and python3-grpcio (gRPC's C-core).
# Installs the missing ones with apt-get (as root; otherwise it says what to install). The tests
# run /usr/bin/python3, Debian's, never a python3 found first on PATH (a pyenv shim has neither
# module).
set -euo pipefail

PY=/usr/bin/python3
PKGS=(python3 python3-requests python3-grpcio)

have() {
	[ -x "$PY" ] && "$PY" -c 'import http.client, urllib.request, requests, urllib3, grpc' 2>/dev/null
}

if have; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "python-deps: $PY with the modules requests and grpc is missing: apt-get install ${PKGS[*]}" >&2
	exit 1
fi
echo "python-deps: installing ${PKGS[*]} with apt-get" >&2
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >&2; then
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >&2
fi
if ! have; then
	echo "python-deps: installed ${PKGS[*]}, yet $PY cannot import requests and grpc" >&2
	exit 1
fi
