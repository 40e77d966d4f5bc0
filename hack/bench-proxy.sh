#!/usr/bin/env bash
# hack/bench-proxy.sh: throughput, latency and memory of retrycap-proxy
# against direct, HAProxy and nginx, on loopback, same machine, same run.
#
#   hack/bench-proxy.sh                 # defaults below
#   DURATION=20s ROUNDS=3 hack/bench-proxy.sh
#
# Backend: nginx (1 worker) answering 200 "ok" to GET /. Every proxy keeps
# connections to it alive. wrk keeps its connections alive too.
#   load "saturated": wrk -t2 -c64 for DURATION, requests as fast as possible
#   load "moderate":  wrk -t1 -c8 with 1 ms think time per connection
#                     (wrk's delay() hook; wrk2 is not packaged, so this
#                     closed-loop, rate-limited load stands in for open loop)
# retrycap-proxy runs as a sidecar would: a forward proxy (absolute-form
# requests, via a wrk Lua script), upstream "backend" with 3 attempts,
# chain cap 4, budget and breaker on. HAProxy and nginx run as reverse
# proxies (they are not forward proxies), keep-alive to the backend.
# RSS is the peak resident set (VmHWM) of the proxy, all its processes.
set -euo pipefail

# On a shared machine other work skews every figure; as root, raise this
# script's priority (children inherit it) so all contenders get the same edge.
if [ "$(id -u)" = 0 ]; then renice -n "${NICE:--15}" -p $$ >/dev/null; fi

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
MOD_CONNS=${MOD_CONNS:-8}
MOD_DELAY_MS=${MOD_DELAY_MS:-1}
BACKEND_PORT=18080 RETRYCAP_PORT=18081 HAPROXY_PORT=18082 NGINX_PORT=18083 ADMIN_PORT=18091

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/bench-proxy.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

missing=()
for bin in wrk haproxy nginx; do command -v "$bin" >/dev/null || missing+=("$bin"); done
if ((${#missing[@]})); then
	echo "installing ${missing[*]} with apt-get" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk haproxy nginx >/dev/null
fi

echo "building retrycap-proxy" >&2
(cd "$root" && go build -o "$work/retrycap-proxy" ./cmd/retrycap-proxy)

userline=""
[ "$(id -u)" = 0 ] && userline="user root;"
mkdir -p "$work/logs"

cat >"$work/backend.conf" <<EOF
$userline
worker_processes 1;
daemon off;
pid $work/backend.pid;
error_log $work/backend.err warn;
events { worker_connections 8192; }
http {
	access_log off;
	keepalive_requests 100000000;
	keepalive_timeout 300s;
	server { listen 127.0.0.1:$BACKEND_PORT; location / { return 200 "ok\n"; } }
}
EOF

cat >"$work/nginx.conf" <<EOF
$userline
worker_processes 2;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 8192; }
http {
	access_log off;
	keepalive_requests 100000000;
	keepalive_timeout 300s;
	upstream be { server 127.0.0.1:$BACKEND_PORT; keepalive 256; }
	server {
		listen 127.0.0.1:$NGINX_PORT;
		location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; }
	}
}
EOF

cat >"$work/haproxy.cfg" <<EOF
global
	maxconn 4000
	nbthread 2
defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	option http-keep-alive
	http-reuse always
frontend fe
	bind 127.0.0.1:$HAPROXY_PORT
	default_backend be
backend be
	server s1 127.0.0.1:$BACKEND_PORT
EOF

# wrk scripts: report rps and latency percentiles in one parsable line.
report='
done = function(summary, latency, requests)
	io.write(string.format("RESULT rps=%.0f p50=%d p99=%d errors=%d\n",
		summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
		summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
end'
echo "$report" >"$work/plain.lua"
printf 'wrk.path = "http://backend/"\nwrk.headers["Host"] = "backend"\n%s\n' "$report" >"$work/forward.lua"
printf 'function delay() return %s end\n%s\n' "$MOD_DELAY_MS" "$report" >"$work/plain-mod.lua"
printf 'wrk.path = "http://backend/"\nwrk.headers["Host"] = "backend"\nfunction delay() return %s end\n%s\n' "$MOD_DELAY_MS" "$report" >"$work/forward-mod.lua"

wait_port() {
	for _ in $(seq 1 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "port $1 did not open" >&2
	return 1
}

nginx -p "$work" -c "$work/backend.conf" &
pids+=($!)
wait_port $BACKEND_PORT

peak_rss_kib() { # sum of VmHWM over a process and its children
	local total=0 p
	for p in "$1" $(pgrep -P "$1" || true); do
		v=$(awk '/VmHWM/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		total=$((total + ${v:-0}))
	done
	echo "$total"
}

run_wrk() { # name script port threads conns
	local out
	out=$(wrk -t"$4" -c"$5" -d"$DURATION" -s "$2" "http://127.0.0.1:$3/" 2>&1)
	echo "$out" | grep '^RESULT' | sed "s/^RESULT/$1/"
}

bench() { # name port script-prefix pid
	wrk -t1 -c8 -d1s -s "$work/$3.lua" "http://127.0.0.1:$2/" >/dev/null 2>&1 # warm up
	sat=$(run_wrk "$1" "$work/$3.lua" "$2" "$THREADS" "$CONNS")
	mod=$(run_wrk "$1" "$work/$3-mod.lua" "$2" 1 "$MOD_CONNS")
	rss=0
	[ -n "${4:-}" ] && rss=$(peak_rss_kib "$4")
	echo "$sat | $mod | rss_kib=$rss"
}

{
	echo "# $(date -u +%FT%TZ) $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "# $(haproxy -v | head -1 | cut -d' ' -f1-3), $(nginx -v 2>&1 | cut -d' ' -f3), $(go version | cut -d' ' -f3), wrk $DURATION, saturated -t$THREADS -c$CONNS, moderate -t1 -c$MOD_CONNS delay ${MOD_DELAY_MS}ms"
} | tee "$work/results.txt"

for round in $(seq 1 "$ROUNDS"); do
	echo "## round $round" | tee -a "$work/results.txt"
	bench direct $BACKEND_PORT plain | tee -a "$work/results.txt"

	"$work/retrycap-proxy" --listen 127.0.0.1:$RETRYCAP_PORT --admin 127.0.0.1:$ADMIN_PORT \
		--service bench --upstreams backend=3 --resolve backend=127.0.0.1:$BACKEND_PORT --chain-cap 4 >/dev/null 2>"$work/retrycap.err" &
	rp=$!
	pids+=($rp)
	wait_port $RETRYCAP_PORT
	bench retrycap $RETRYCAP_PORT forward $rp | tee -a "$work/results.txt"
	kill -TERM $rp
	wait $rp || true

	haproxy -f "$work/haproxy.cfg" -db >/dev/null 2>"$work/haproxy.err" &
	hp=$!
	pids+=($hp)
	wait_port $HAPROXY_PORT
	bench haproxy $HAPROXY_PORT plain $hp | tee -a "$work/results.txt"
	kill $hp
	wait $hp 2>/dev/null || true

	nginx -p "$work" -c "$work/nginx.conf" &
	np=$!
	pids+=($np)
	wait_port $NGINX_PORT
	bench nginx $NGINX_PORT plain $np | tee -a "$work/results.txt"
	kill $np
	wait $np 2>/dev/null || true
done

echo "# columns: name rps p50_us p99_us errors (saturated) | same (moderate) | peak RSS" >&2
