#!/bin/bash
# The gRPC benchmark of docs/grpc.md: unary calls with small messages over 1
# and 64 client connections, direct vs retrycap-proxy (grpc-go through
# HTTPS_PROXY: CONNECT, then h2c terminated) vs HAProxy (proto h2 to the h2c
# server) vs nginx (grpc_pass), all in the same run, one core each
# (GOMAXPROCS=1, nbthread 1, worker_processes 1). With BEFORE=<git revision>
# a second retrycap-proxy built from that revision runs beside the working
# tree's (an A/B in the same run, e.g. before and after a change); after
# each run a retrycap's CPU time (cpu_ticks: user + system clock ticks,
# warm-up included), after each shape every proxy's RSS.
# Usage (from the repository root): DUR=5s [BEFORE=main] internal/proxy/h2/grpcbench/bench.sh
set -u
DUR=${DUR:-5s}
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
go build -o "$W/grpcbench" ./internal/proxy/h2/grpcbench || exit 1
go build -o "$W/retrycap-proxy" ./cmd/retrycap-proxy || exit 1
if [ -n "${BEFORE:-}" ]; then
  mkdir -p "$W/before" && git archive "$BEFORE" | tar -x -C "$W/before" || exit 1
  (cd "$W/before" && go build -o "$W/retrycap-before" ./cmd/retrycap-proxy) || exit 1
fi
cat > "$W/haproxy.cfg" <<CFG
global
    nbthread 1
    maxconn 5000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend grpc_in
    bind 127.0.0.1:19103 proto h2
    default_backend grpc_out
backend grpc_out
    http-reuse always
    server s1 127.0.0.1:19100 proto h2
CFG
mkdir -p "$W/body"
cat > "$W/nginx.conf" <<CFG
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log warn;
events { worker_connections 10000; }
http {
    access_log off;
    client_body_temp_path $W/body;
    upstream grpc_up { server 127.0.0.1:19100; keepalive 128; }
    server {
        listen 127.0.0.1:19104 http2;
        location / { grpc_pass grpc://grpc_up; }
    }
}
CFG
B=$W/grpcbench
$B -serve 127.0.0.1:19100 &
ARGS="--upstreams echo=3 --resolve echo=127.0.0.1:19100 --retry-on connect-failure,reset,503,unavailable --chain-cap 4"
GOMAXPROCS=1 "$W/retrycap-proxy" --listen 127.0.0.1:19101 --admin 127.0.0.1:19102 $ARGS > "$W/rc.log" 2>&1 & R=$!
RS=
if [ -n "${BEFORE:-}" ]; then
  GOMAXPROCS=1 "$W/retrycap-before" --listen 127.0.0.1:19105 --admin 127.0.0.1:19106 $ARGS > "$W/rs.log" 2>&1 & RS=$!
fi
/usr/sbin/haproxy -f "$W/haproxy.cfg" > "$W/hap.log" 2>&1 & H=$!
/usr/sbin/nginx -c "$W/nginx.conf" -g 'daemon off;' > "$W/ngx.log" 2>&1 & N=$!
sleep 1
rss() { awk '/VmRSS/{print $2" kB"}' /proc/$1/status; }
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
viaproxy() { # label pid port shape...
  local l=$1 pid=$2 port=$3 t0 out; shift 3
  t0=$(ticks $pid)
  out=$(HTTPS_PROXY=http://127.0.0.1:$port $B -label $l -target dns:///echo:50051 -conns $1 -concurrency $2 -rate $3 -duration $DUR)
  echo "$out cpu_ticks=$(( $(ticks $pid) - t0 ))"
}
for shape in "1 16 0" "64 256 0" "1 16 2000" "64 64 2000"; do
  set -- $shape
  env -u HTTPS_PROXY $B -label direct   -target 127.0.0.1:19100 -conns $1 -concurrency $2 -rate $3 -duration $DUR
  [ -n "$RS" ] && viaproxy retrycap-before $RS 19105 $1 $2 $3
  viaproxy retrycap $R 19101 $1 $2 $3
  env -u HTTPS_PROXY $B -label haproxy  -target 127.0.0.1:19103 -conns $1 -concurrency $2 -rate $3 -duration $DUR
  env -u HTTPS_PROXY $B -label nginx    -target 127.0.0.1:19104 -conns $1 -concurrency $2 -rate $3 -duration $DUR
  echo "uptime: $(uptime | sed 's/.*load/load/'); RSS after the shape: retrycap $(rss $R)${RS:+, before $(rss $RS)}, haproxy $(rss $H)"
done
echo "RSS after the runs: retrycap $(rss $R)${RS:+, before $(rss $RS)}, haproxy $(rss $H), nginx worker $(for p in $(pgrep -P $N); do rss $p; done) + master $(rss $N)"
