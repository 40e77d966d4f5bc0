#!/bin/bash
# The operating system's view of a proxy and HAProxy under the same paced
# gRPC load (docs/benchmarks.md, "The relay's tail: where a slow call
# waits"): per run, from /proc/PID/task/*/schedstat and status, the
# process's CPU time, its threads' run delay (runnable, waiting for a
# CPU), time slices, voluntary and involuntary context switches; the two
# contenders in turn, the order alternating by round. With TRACE=FILE and
# a build made with -tags rltrace, the proxy writes a runtime/trace of
# 3 s of its first run to FILE (read it with schedtrace.py).
# Usage (from the repository root):
#   go build -o /tmp/p ./cmd/retrycap-proxy
#   ROUNDS=4 internal/proxy/h2/grpcbench/sched.sh /tmp/p ["64 64 2000"]
set -u
P=$1; SHAPE=${2:-"64 64 2000"}
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
cat > "$W/h.cfg" <<CFG
global
    nbthread 1
    maxconn 5000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend grpc_in
    bind 127.0.0.1:19503 proto h2
    default_backend grpc_out
backend grpc_out
    http-reuse always
    server s1 127.0.0.1:19500 proto h2
CFG
G=$W/grpcbench
go build -o "$G" ./internal/proxy/h2/grpcbench || exit 1
$G -serve 127.0.0.1:19500 &
ARGS="--upstreams echo=3 --resolve echo=127.0.0.1:19500 --retry-on connect-failure,reset,503,unavailable --chain-cap 4"
TR=""
if [ -n "${TRACE:-}" ]; then TR="RL_TRACE=$TRACE RL_TRACE_AFTER=${TRACE_AFTER:-10s} RL_TRACE_FOR=3s"; fi
env GOMAXPROCS=1 $TR "$P" --listen 127.0.0.1:19501 --admin 127.0.0.1:19502 $ARGS > "$W/p.log" 2>&1 & R=$!
/usr/sbin/haproxy -f "$W/h.cfg" > "$W/h.log" 2>&1 & H=$!
sleep 1
st() { cat /proc/"$1"/task/*/schedstat | awk '{c+=$1; d+=$2; n+=$3} END {print c, d, n}'; }
cs() { grep -h ctxt /proc/"$1"/task/*/status | awk '/nonvol/{nv+=$2; next} {v+=$2} END {print v, nv}'; }
meas() { # label pid target...
  local l=$1 pid=$2 a b; shift 2
  a="$(st "$pid") $(cs "$pid")"
  "$@" -conns $C -concurrency $N -rate $RATE -duration ${DUR:-4s} | sed 's/conns=.*calls=/calls=/'
  b="$(st "$pid") $(cs "$pid")"
  echo "$a $b" | awk -v l="$l" '{printf "   %s: cpu=%.0fms run_delay=%.0fms slices=%d vol_cs=%d invol_cs=%d\n", l, ($6-$1)/1e6, ($7-$2)/1e6, $8-$3, $9-$4, $10-$5}'
}
read -r C N RATE <<<"$SHAPE"
RATE=${RATE:-0}
for i in $(seq "${ROUNDS:-2}"); do
  echo "round $i $(uptime | sed 's/.*load/load/')"
  env -u HTTPS_PROXY $G -label direct -target 127.0.0.1:19500 -conns $C -concurrency $N -rate $RATE -duration ${DUR:-4s} | sed 's/conns=.*calls=/calls=/'
  if [ $((i % 2)) = 1 ]; then
    meas relay $R env HTTPS_PROXY=http://127.0.0.1:19501 $G -label relay -target dns:///echo:50051
    meas haproxy $H env -u HTTPS_PROXY $G -label haproxy -target 127.0.0.1:19503
  else
    meas haproxy $H env -u HTTPS_PROXY $G -label haproxy -target 127.0.0.1:19503
    meas relay $R env HTTPS_PROXY=http://127.0.0.1:19501 $G -label relay -target dns:///echo:50051
  fi
done
