#!/bin/bash
# Before/after of two retrycap-proxy builds against HAProxy in the same run
# (docs/benchmarks.md, gRPC section): per throughput shape, HAProxy, proxy
# A, proxy B, HAProxy again (a ratio is to the mean of the two HAProxy
# runs around it). B_ENV is the environment of B only (e.g. "GOGC=200
# GOMEMLIMIT=26MiB"). The bench's ports +100, so it can run beside bench.sh.
# SHAPES overrides the shapes: "conns concurrency [calls/s]" each; a paced
# shape (calls/s given) runs the echo server direct first (the added
# latency is the proxy's p50/p99 minus direct's), e.g.
#   SHAPES='"64 64 2000" "1 16 2000"' (eval'd).
# Usage (from the repository root):
#   go build -o /tmp/before ./cmd/retrycap-proxy   # at the old commit
#   go build -o /tmp/after ./cmd/retrycap-proxy    # at the new one
#   DUR=5s internal/proxy/h2/grpcbench/quick.sh /tmp/before /tmp/after [B_ENV]
# ROUNDS=N repeats every shape N times, A and B in turn first (on a loaded
# machine the order inside a round matters); every line carries its
# process's CPU ticks and ticks per 1,000 calls (HAProxy's too), the figure
# least at the mercy of the machine's load.
# PIN=1 pins the load (the echo server and every grpcbench client) to CPU 0
# and the proxies and HAProxy to CPU 1 (taskset), so that a proxy's tail is
# its own and not the client's or the server's turn on the same core; all
# contenders, direct included, run under the same split. Summarise many
# rounds with internal/proxy/h2/grpcbench/p99sum.py FILE.
# PROCS=N (default 1) runs both proxies at GOMAXPROCS=N and HAProxy at
# nbthread N: PROCS=2 is the sidecar as injected (internal/inject sets
# GOMAXPROCS=2) against HAProxy with as many threads.
set -u
PROCS=${PROCS:-1}
A=$1; B=$2; BENV=${3:-}
DUR=${DUR:-5s}
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
cat > "$W/haproxy.cfg" <<CFG
global
    nbthread $PROCS
    maxconn 5000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend grpc_in
    bind 127.0.0.1:19203 proto h2
    default_backend grpc_out
backend grpc_out
    http-reuse always
    server s1 127.0.0.1:19200 proto h2
CFG
G=$W/grpcbench
go build -o "$G" ./internal/proxy/h2/grpcbench || exit 1
LOAD=""; PROX=""
if [ "${PIN:-0}" = 1 ]; then LOAD="taskset -c 0"; PROX="taskset -c 1"; fi
$LOAD $G -serve 127.0.0.1:19200 &
ARGS="--upstreams echo=3 --resolve echo=127.0.0.1:19200 --retry-on connect-failure,reset,503,unavailable --chain-cap 4"
GOMAXPROCS=$PROCS $PROX $A --listen 127.0.0.1:19201 --admin 127.0.0.1:19202 $ARGS > "$W/a.log" 2>&1 & RA=$!
env GOMAXPROCS=$PROCS $BENV $PROX $B --listen 127.0.0.1:19211 --admin 127.0.0.1:19212 $ARGS > "$W/b.log" 2>&1 & RB=$!
$PROX /usr/sbin/haproxy -f "$W/haproxy.cfg" > "$W/hap.log" 2>&1 & RH=$!
sleep 1
rss() { awk '/VmRSS/{print $2" kB"}' /proc/$1/status; }
# The proxy's CPU time (user + system, clock ticks) around a run: per call
# it is less at the mercy of the machine's load than req/s is (it counts
# the warm-up too, the same for both).
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
percall() { # ticks output: ticks per 1,000 calls
  awk -v t=$1 -v c="$(sed 's/.*calls=\([0-9]*\).*/\1/' <<<"$2")" 'BEGIN{ if (c > 0) printf "%.3f", t*1000/c; else print "-" }'
}
run() { # label pid port shape...
  local l=$1 pid=$2 port=$3 t0 out t; shift 3
  t0=$(ticks $pid)
  out=$(HTTPS_PROXY=http://127.0.0.1:$port $LOAD $G -label $l -target dns:///echo:50051 -conns $1 -concurrency $2 -rate ${3:-0} -duration $DUR)
  t=$(( $(ticks $pid) - t0 ))
  echo "$out cpu_ticks=$t ticks/kcall=$(percall $t "$out")"
}
hap() { # shape...
  local t0 out t
  t0=$(ticks $RH)
  out=$(env -u HTTPS_PROXY $LOAD $G -label haproxy -target 127.0.0.1:19203 -conns $1 -concurrency $2 -rate ${3:-0} -duration $DUR)
  t=$(( $(ticks $RH) - t0 ))
  echo "$out cpu_ticks=$t ticks/kcall=$(percall $t "$out")"
}
SHAPES=${SHAPES:-'"1 16" "64 256"'}
eval "set -- $SHAPES"
for round in $(seq "${ROUNDS:-1}"); do
  for shape in "$@"; do
    set -- $shape
    echo "round $round uptime: $(uptime | sed 's/.*load/load/')"
    if [ "${3:-0}" != 0 ]; then
      env -u HTTPS_PROXY $LOAD $G -label direct -target 127.0.0.1:19200 -conns $1 -concurrency $2 -rate $3 -duration $DUR
    fi
    hap $1 $2 ${3:-0}
    if [ $((round % 2)) = 1 ]; then
      run A $RA 19201 $1 $2 ${3:-0}
      run B $RB 19211 $1 $2 ${3:-0}
    else
      run B $RB 19211 $1 $2 ${3:-0}
      run A $RA 19201 $1 $2 ${3:-0}
    fi
    hap $1 $2 ${3:-0}
  done
  eval "set -- $SHAPES"
done
echo "RSS: A $(rss $RA), B $(rss $RB)"
