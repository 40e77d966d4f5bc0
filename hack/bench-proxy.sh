#!/usr/bin/env bash
# hack/bench-proxy.sh: throughput, latency and memory of retrycap-proxy
# against direct, HAProxy and nginx, on loopback, same machine, same run.
#
#   hack/bench-proxy.sh                 # defaults below
#   DURATION=20s ROUNDS=3 PROCS="1 2" hack/bench-proxy.sh
#
# Backend: nginx (1 worker) answering 200 "ok" to GET /, the same for every
# contender. Every proxy keeps connections to it alive; so do the clients.
#   load "saturated": wrk -tTHREADS -cCONNS for DURATION, as fast as possible
#   load "open loop": hack/loadgen at RATE req/s over OL_CONNS connections
#                     for DURATION; latency is measured from each request's
#                     intended send time (no coordinated omission), so p99
#                     minus direct's p99 is the proxy's added p99.
# PROCS: each value is run in turn, and sets all three proxies alike:
# retrycap-proxy's GOMAXPROCS, HAProxy's nbthread, nginx's worker_processes.
# retrycap-proxy runs as a sidecar would: a forward proxy (absolute-form
# requests, via a wrk Lua script), upstream "backend" with 3 attempts,
# chain cap 4, budget and breaker on. HAProxy and nginx run as reverse
# proxies (they are not forward proxies), keep-alive to the backend.
# retrycap-proxy runs on its default engine, the event loops (--engine=loop);
# "retrycap-goroutine" (optional) is the same binary with --engine=goroutine
# (a goroutine per connection, fasthttp's server and client).
# "bare" is hack/loadgen/bareproxy: the goroutine engine's fasthttp server
# and client with the same options and no retry logic.
# "gnet" (optional, not in the default CONTENDERS) is hack/gnetprobe: the
# same bare forwarder on an event-loop engine (gnet v2, event loops =
# GOMAXPROCS), a module of its own; it asks whether another engine would
# close the gap to HAProxy.
# RSS is the peak resident set (VmHWM) of the proxy, all its processes.
# cpu_us is the proxy's CPU time (user + system, all its processes) per
# request during the saturated run: how much of the shared 2 cores one
# request costs it. Throughput on this machine moves by up to 1.4x from
# round to round (placement of wrk, backend and proxy on the 2 cores);
# cpu_us moves far less, so it tells a small change in the proxy's own cost
# from that noise.
# The proxies run in a different order each round (rotated), so that none
# always runs first, or right after the same neighbour.
# "retrycap-log" is retrycap-proxy (event loops) with --access-log=FILE (one JSON line per
# attempt, background writer); "haproxy-log" is HAProxy with its own logging on (option httplog,
# to stdout, redirected to a file): the access-log overhead, each against its own baseline.
#   CONTENDERS="retrycap bare haproxy nginx"  which proxies to run (add "retrycap-goroutine", "gnet",
#                                            "retrycap-log", "haproxy-log")
#   OPEN_LOOP=0                              skip the open-loop load (quick A/B runs)
#   PROXY_BIN=path                           a prebuilt retrycap-proxy to run instead
#   HEADERS="Name: value|Name: value"        request headers every client sends to every contender (wrk -H, loadgen -header;
#                                            "|" separates them), so that a comparison with a header is fair
#   HDR_HEADERS="Retrycap-Deadline: 5000"    the headers a contender named NAME-hdr (retrycap-hdr, haproxy-hdr, any
#                                            other contender with -hdr) is sent on top of HEADERS: the same proxy with
#                                            and without a header in alternating order in the same rounds (issue 29:
#                                            the deadline header's cost, CONTENDERS="retrycap retrycap-hdr haproxy haproxy-hdr")
#   PROXY_BIN_B=path                         a second prebuilt retrycap-proxy, contender "retrycap-b"
#                                            (event loops, access log not set: an older build works),
#                                            to A/B two builds in the same run against the same anchor
#                                            ("retrycap-b-log": the same with --access-log=FILE, an
#                                            access-log A/B of two builds)
set -euo pipefail

# On a shared machine other work skews every figure. With autogroup
# scheduling (Linux default) nice only ranks processes within one session,
# so a plain renice does nothing against other sessions' builds: run in a
# session of our own and, as root, raise that session's autogroup priority
# (every contender inherits it, so all get the same edge).
if [ -z "${BENCH_OWN_SESSION:-}" ] && command -v setsid >/dev/null; then
	BENCH_OWN_SESSION=1 exec setsid --wait "$0" "$@"
fi
# RT=1 goes further: round-robin real-time priority for the whole run, so
# builds get only the kernel's RT throttling remainder (5 %) while the
# contenders run; the figures in docs/benchmarks/proxy.md use it.
if [ "$(id -u)" = 0 ]; then
	renice -n "${NICE:--15}" -p $$ >/dev/null
	if [ -w /proc/self/autogroup ]; then echo "${NICE:--15}" >/proc/$$/autogroup 2>/dev/null || true; fi
	if [ -n "${RT:-}" ]; then chrt -r -p "${RT_PRIO:-10}" $$; fi
fi

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
PROCS=${PROCS:-1 2}
RATE=${RATE:-2000}
OL_CONNS=${OL_CONNS:-16}
CONTENDERS=${CONTENDERS:-retrycap bare haproxy nginx}
OPEN_LOOP=${OPEN_LOOP:-1}
HEADERS=${HEADERS:-}
HDR_HEADERS=${HDR_HEADERS:-Retrycap-Deadline: 5000}
BACKEND_PORT=18080 RETRYCAP_PORT=18081 HAPROXY_PORT=18082 NGINX_PORT=18083 BARE_PORT=18084 GNET_PORT=18085 RCGO_PORT=18086 RCLOG_PORT=18087 HALOG_PORT=18088 RCB_PORT=18089 RCBLOG_PORT=18090 ADMIN_PORT=18091

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
(cd "$root" && go build -o "$work/retrycap-proxy" ./cmd/retrycap-proxy && go build -o "$work/loadgen" ./hack/loadgen && go build -o "$work/bareproxy" ./hack/loadgen/bareproxy)
[ -n "${PROXY_BIN:-}" ] && cp "$PROXY_BIN" "$work/retrycap-proxy"
[ -n "${PROXY_BIN_B:-}" ] && cp "$PROXY_BIN_B" "$work/retrycap-proxy-b"
case " $CONTENDERS " in *" gnet "*) (cd "$root/hack/gnetprobe" && go build -o "$work/gnetprobe" .) ;; esac

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

write_proxy_configs() { # procs
cat >"$work/nginx.conf" <<EOF
$userline
worker_processes $1;
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
	nbthread $1
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
# HAProxy with its own access log: one line per request (option httplog) to stdout.
sed -e 's/^global$/global\n\tlog stdout format raw local0/' -e 's/^defaults$/defaults\n\tlog global\n\toption httplog/' \
	-e "s/127.0.0.1:$HAPROXY_PORT/127.0.0.1:$HALOG_PORT/" "$work/haproxy.cfg" >"$work/haproxy-log.cfg"
}

# wrk scripts: report rps and latency percentiles in one parsable line.
report='
done = function(summary, latency, requests)
	io.write(string.format("RESULT rps=%.0f p50=%d p99=%d errors=%d reqs=%d\n",
		summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
		summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout, summary.requests))
end'
echo "$report" >"$work/plain.lua"
printf 'wrk.path = "http://backend/"\nwrk.headers["Host"] = "backend"\n%s\n' "$report" >"$work/forward.lua"

# header_args SEP-LIST FLAG: the headers of a "|"-separated list as FLAG "line" pairs, into hargs.
header_args() {
	local line
	local -a lines
	IFS='|' read -r -a lines <<<"$1"
	for line in "${lines[@]}"; do
		line=$(echo "$line" | sed 's/^ *//; s/ *$//')
		[ -n "$line" ] && hargs+=("$2" "$line")
	done
	return 0
}
# The headers of the contender being measured: HEADERS, and HDR_HEADERS for a NAME-hdr contender
# (set by run_contender).
wrk_h=() gen_h=()

wait_port() {
	for _ in $(seq 1 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "port $1 did not open" >&2
	return 1
}

nginx -p "$work" -c "$work/backend.conf" &
backend_pid=$!
pids+=($backend_pid)
wait_port $BACKEND_PORT

peak_rss_kib() { # sum of VmHWM over a process and its children
	local total=0 p
	for p in "$1" $(pgrep -P "$1" || true); do
		v=$(awk '/VmHWM/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		total=$((total + ${v:-0}))
	done
	echo "$total"
}

cpu_ticks() { # user + system clock ticks of a process and its children
	local total=0 p
	for p in "$1" $(pgrep -P "$1" || true); do
		v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
		total=$((total + ${v:-0}))
	done
	echo "$total"
}

# child_ticks: user + system clock ticks of this shell's waited-for children (the shell's own
# `times`, second line), so that wrk's CPU is read after it exited. `times` runs in this shell,
# redirected to a file: in a pipe or $(...) it would count a subshell's children.
child_ticks() {
	times >"$work/times"
	tail -1 "$work/times" | awk -v hz="$(getconf CLK_TCK)" '{
		n = 0
		for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); n += (p[1] * 60 + p[2]) * hz }
		printf "%.0f", n }'
}

# lo_packets: packets received on loopback so far (every segment on lo, data or ACK, is received once).
lo_packets() {
	awk -F'[: ]+' '$2 == "lo" { print $4; exit }' /proc/net/dev
}

# machine_ticks: the machine's busy and idle clock ticks (/proc/stat's first line: user nice
# system idle iowait irq softirq steal), "busy idle softirq".
machine_ticks() {
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6, $8; exit }' /proc/stat
}

run_wrk() { # name script port [pid]
	local out line c0=0 c1 reqs w0 w1 b0 b1 m0 m1 p0 p1
	[ -n "${4:-}" ] && c0=$(cpu_ticks "$4")
	child_ticks >"$work/w0"
	b0=$(cpu_ticks "$backend_pid") m0=$(machine_ticks) p0=$(lo_packets)
	wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "${wrk_h[@]}" -s "$2" "http://127.0.0.1:$3/" >"$work/wrk.out" 2>&1 || true
	child_ticks >"$work/w1"
	b1=$(cpu_ticks "$backend_pid") m1=$(machine_ticks) p1=$(lo_packets)
	w0=$(cat "$work/w0") w1=$(cat "$work/w1") out=$(cat "$work/wrk.out")
	line=$(echo "$out" | grep '^RESULT' | sed "s|^RESULT|$1|")
	reqs=$(echo "$line" | sed -n 's/.*reqs=\([0-9]*\).*/\1/p')
	# per TICKS: clock ticks as µs per request served.
	per() { awk -v t="$1" -v r="${reqs:-0}" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (r > 0 ? t * 1e6 / hz / r : 0) }'; }
	if [ -n "${4:-}" ]; then
		c1=$(cpu_ticks "$4")
		line="$line cpu_us=$(per $((c1 - c0)))"
	fi
	# Where the two cores went during the saturated run, per request: wrk, the backend, the
	# machine's busy total (every process, interrupts) and its idle time (both cores).
	read -r mb0 mi0 ms0 <<<"$m0"
	read -r mb1 mi1 ms1 <<<"$m1"
	line="$line wrk_us=$(per $((w1 - w0))) backend_us=$(per $((b1 - b0))) busy_us=$(per $((mb1 - mb0))) softirq_us=$(per $((ms1 - ms0))) idle_us=$(per $((mi1 - mi0))) lo_pkts=$(awk -v p=$((p1 - p0)) -v r="${reqs:-0}" 'BEGIN { printf "%.2f", (r > 0 ? p / r : 0) }')"
	echo "$line"
}

run_open_loop() { # name port forward|plain
	[ "$OPEN_LOOP" = 0 ] && return 0
	local args=(-addr "127.0.0.1:$2" -rate "$RATE" -conns "$OL_CONNS" -duration "$DURATION" "${gen_h[@]}")
	[ "$3" = forward ] && args+=(-target http://backend/ -host backend)
	"$work/loadgen" "${args[@]}" | grep '^RESULT' | sed "s|^RESULT|$1|"
}

bench() { # name port plain|forward pid
	wrk -t1 -c8 -d1s "${wrk_h[@]}" -s "$work/$3.lua" "http://127.0.0.1:$2/" >/dev/null 2>&1 # warm up
	sat=$(run_wrk "$1" "$work/$3.lua" "$2" "${4:-}")
	ol=$(run_open_loop "$1" "$2" "$3")
	rss=0
	[ -n "${4:-}" ] && rss=$(peak_rss_kib "$4")
	echo "$sat | $ol | rss_kib=$rss"
}

run_contender() { # name procs
	# NAME-hdr: the contender NAME, its clients sending HDR_HEADERS too.
	local base=${1%-hdr} hargs=()
	header_args "$HEADERS" -H
	[ "$base" != "$1" ] && header_args "$HDR_HEADERS" -H
	wrk_h=("${hargs[@]}") hargs=()
	header_args "$HEADERS" -header
	[ "$base" != "$1" ] && header_args "$HDR_HEADERS" -header
	gen_h=("${hargs[@]}")
	case $base in
	retrycap | retrycap-goroutine | retrycap-log)
		local engine=loop port=$RETRYCAP_PORT alog=off
		if [ "$base" = retrycap-goroutine ]; then engine=goroutine port=$RCGO_PORT; fi
		if [ "$base" = retrycap-log ]; then port=$RCLOG_PORT alog="$work/retrycap-access.log"; fi
		GOMAXPROCS=$2 "$work/retrycap-proxy" --engine $engine --listen 127.0.0.1:$port --admin 127.0.0.1:$ADMIN_PORT \
			--service bench --upstreams backend=3 --resolve backend=127.0.0.1:$BACKEND_PORT --chain-cap 4 --access-log "$alog" >/dev/null 2>"$work/$1.err" &
		local rp=$!
		pids+=($rp)
		wait_port $port
		bench "$1/p$2" $port forward $rp | tee -a "$work/results.txt"
		if [ "$base" = retrycap-log ]; then
			echo "# retrycap-log/p$2: $(wc -l <"$work/retrycap-access.log") access-log lines, dropped $(curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '/^retrycap_proxy_access_log_dropped_total/ {print $2}')" | tee -a "$work/results.txt"
		fi
		kill -TERM $rp
		wait $rp || true
		rm -f "$work/retrycap-access.log"
		;;
	retrycap-b | retrycap-b-log)
		local bport=$RCB_PORT blog=()
		if [ "$base" = retrycap-b-log ]; then bport=$RCBLOG_PORT blog=(--access-log "$work/retrycap-b-access.log"); fi
		GOMAXPROCS=$2 "$work/retrycap-proxy-b" --listen 127.0.0.1:$bport --admin 127.0.0.1:$ADMIN_PORT \
			--service bench --upstreams backend=3 --resolve backend=127.0.0.1:$BACKEND_PORT --chain-cap 4 "${blog[@]}" >/dev/null 2>"$work/$1.err" &
		local rbp=$!
		pids+=($rbp)
		wait_port $bport
		bench "$1/p$2" $bport forward $rbp | tee -a "$work/results.txt"
		if [ "$base" = retrycap-b-log ]; then
			echo "# retrycap-b-log/p$2: $(wc -l <"$work/retrycap-b-access.log") access-log lines, dropped $(curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '/^retrycap_proxy_access_log_dropped_total/ {print $2}')" | tee -a "$work/results.txt"
		fi
		kill -TERM $rbp
		wait $rbp || true
		rm -f "$work/retrycap-b-access.log"
		;;
	haproxy-log)
		haproxy -f "$work/haproxy-log.cfg" -db >"$work/haproxy-access.log" 2>"$work/haproxy-log.err" &
		local hlp=$!
		pids+=($hlp)
		wait_port $HALOG_PORT
		bench "$1/p$2" $HALOG_PORT plain $hlp | tee -a "$work/results.txt"
		echo "# $1/p$2: $(wc -l <"$work/haproxy-access.log") access-log lines" | tee -a "$work/results.txt"
		kill $hlp
		wait $hlp 2>/dev/null || true
		rm -f "$work/haproxy-access.log"
		;;
	bare)
		GOMAXPROCS=$2 "$work/bareproxy" -listen 127.0.0.1:$BARE_PORT -backend 127.0.0.1:$BACKEND_PORT 2>"$work/bare.err" &
		local bp=$!
		pids+=($bp)
		wait_port $BARE_PORT
		bench "$1/p$2" $BARE_PORT forward $bp | tee -a "$work/results.txt"
		kill $bp
		wait $bp 2>/dev/null || true
		;;
	gnet)
		GOMAXPROCS=$2 "$work/gnetprobe" -listen 127.0.0.1:$GNET_PORT -backend 127.0.0.1:$BACKEND_PORT >/dev/null 2>"$work/gnet.err" & # gnet logs its start to stdout
		local gp=$!
		pids+=($gp)
		wait_port $GNET_PORT
		bench "$1/p$2" $GNET_PORT forward $gp | tee -a "$work/results.txt"
		kill $gp
		wait $gp 2>/dev/null || true
		;;
	haproxy)
		haproxy -f "$work/haproxy.cfg" -db >/dev/null 2>"$work/haproxy.err" &
		local hp=$!
		pids+=($hp)
		wait_port $HAPROXY_PORT
		bench "$1/p$2" $HAPROXY_PORT plain $hp | tee -a "$work/results.txt"
		kill $hp
		wait $hp 2>/dev/null || true
		;;
	nginx)
		nginx -p "$work" -c "$work/nginx.conf" &
		local np=$!
		pids+=($np)
		wait_port $NGINX_PORT
		bench "$1/p$2" $NGINX_PORT plain $np | tee -a "$work/results.txt"
		kill $np
		wait $np 2>/dev/null || true
		;;
	*)
		echo "unknown contender $1" >&2
		return 1
		;;
	esac
}

{
	echo "# $(date -u +%FT%TZ) $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "# $(haproxy -v | head -1 | cut -d' ' -f1-3), $(nginx -v 2>&1 | cut -d' ' -f3), $(go version | cut -d' ' -f3), wrk $DURATION, saturated -t$THREADS -c$CONNS, open loop $RATE req/s over $OL_CONNS conns"
	[ -n "$HEADERS" ] && echo "# every client sends: $HEADERS"
	case " $CONTENDERS " in *"-hdr "*) echo "# NAME-hdr contenders' clients also send: $HDR_HEADERS" ;; esac
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg); scheduling: autogroup nice ${NICE:--15}${RT:+, real-time round-robin ${RT_PRIO:-10}}"
} | tee "$work/results.txt"

read -r -a contenders <<<"$CONTENDERS"
for round in $(seq 1 "$ROUNDS"); do
	echo "## round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/results.txt"
	wrk_h=() gen_h=() hargs=()
	header_args "$HEADERS" -H
	wrk_h=("${hargs[@]}") hargs=()
	header_args "$HEADERS" -header
	gen_h=("${hargs[@]}")
	bench direct $BACKEND_PORT plain | tee -a "$work/results.txt"
	for procs in $PROCS; do
		write_proxy_configs "$procs"
		n=${#contenders[@]}
		for i in $(seq 0 $((n - 1))); do
			run_contender "${contenders[$(((i + round - 1) % n))]}" "$procs"
		done
	done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/results.txt"

echo "# columns: name rps p50_us p99_us errors reqs cpu_us wrk_us backend_us busy_us softirq_us idle_us (wrk, saturated; cpu_us = the proxy's CPU time per request, wrk_us and backend_us the client's and the backend's, busy_us and idle_us the machine's busy and idle time over both cores, softirq_us the part of busy_us in soft interrupts, lo_pkts the loopback packets per request) | name rate sent p50 p90 p99 p999 max errors, µs (open loop) | peak RSS" >&2
