#!/bin/bash
# bench-interleave.sh: two retrycap-proxy builds (A, B) and HAProxy behind one nginx backend,
# all started once, then wrk'd in turn (A, HAProxy, B: DUR each) for CYCLES cycles, each cycle
# started only when the machine was at most QUIET % busy over the second before it. Per run:
# req/s, wrk's p99 (µs), the backend's voluntary context switches per 1,000 requests (how often
# it slept and was woken) and "foreign" CPU: the machine's busy time not spent by these
# processes or wrk, in % of both cores. A cycle whose three runs all had under FMAX % foreign
# is GOOD; the others are printed but marked noisy (a 2-core machine shared with builds moves a
# 2-s run by +-30 %). Summarise with: FILTER=GOOD hack/bench-interleave.sh --sum FILE.
# Usage (from the repository root; wrk, haproxy and nginx installed: hack/bench-proxy.sh
# installs them):
#   go build -o /tmp/a ./cmd/retrycap-proxy     # at one commit
#   go build -o /tmp/b ./cmd/retrycap-proxy     # at another (or the same, with B_ENV/B_ARGS)
#   A=/tmp/a B=/tmp/b CYCLES=40 QUIET=15 FMAX=5 hack/bench-interleave.sh > run.txt
# B_ENV: environment of B only ("GOGC=200"); B_ARGS: extra flags of B only ("--loop-spin=50us").
# MAXSEC bounds the whole run. Every process it starts is stopped by PID on exit.
set -u
if [ "${1:-}" = --sum ]; then
	for k in A/H B/H B/A; do
		grep "${FILTER:-.}" "$2" | grep -o "$k=[0-9.]*" | cut -d= -f2 | sort -n | awk -v k=$k '{a[NR]=$1} END {
			n = NR; if (n == 0) { print k, "no cycles"; exit } ge = 0; for (i = 1; i <= n; i++) if (a[i] >= 1) ge++
			printf "%s n=%d q1=%.3f median=%.3f q3=%.3f >=1: %d\n", k, n, a[int(n/4)+1], (n%2 ? a[(n+1)/2] : (a[n/2]+a[n/2+1])/2), a[int(3*n/4)+1], ge }'
	done
	grep "${FILTER:-.}" "$2" | awk '{ split($0, a, "be-csw/kreq "); split(a[2], p, " "); A += p[2]; B += p[4]; H += p[6]; n++ }
		END { if (n) printf "backend context switches per 1,000 requests, mean: A %.1f B %.1f HAProxy %.1f\n", A/n, B/n, H/n }'
	exit 0
fi
A=${A:?A=path of a retrycap-proxy} B=${B:?B=path of a retrycap-proxy} B_ENV=${B_ENV:-} CYCLES=${CYCLES:-20} DUR=${DUR:-2s} CONNS=${CONNS:-64} P=${P:-2}
B_ARGS=${B_ARGS:-}
for bin in wrk haproxy nginx; do command -v $bin >/dev/null || { echo "$bin is not installed (hack/bench-proxy.sh installs wrk, haproxy and nginx)" >&2; exit 2; }; done
userline=""; [ "$(id -u)" = 0 ] && userline="user root;"
w=$(mktemp -d /tmp/ilv.XXXX); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$w"; }
trap cleanup EXIT
cat >"$w/be.conf" <<EOC
$userline
worker_processes 1;
daemon off;
pid $w/be.pid;
error_log $w/be.err warn;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000; keepalive_timeout 300s;
 server { listen 127.0.0.1:18180; location / { return 200 "ok\n"; } } }
EOC
cat >"$w/ha.cfg" <<EOC
global
	maxconn 4000
	nbthread $P
defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	option http-keep-alive
	http-reuse always
frontend fe
	bind 127.0.0.1:18182
	default_backend be
backend be
	server s1 127.0.0.1:18180
EOC
printf 'wrk.path = "http://backend/"\nwrk.headers["Host"] = "backend"\ndone = function(s, l, r) io.write(string.format("RPS %%.0f %%d\\n", s.requests / (s.duration / 1e6), l:percentile(99))) end\n' >"$w/f.lua"
nginx -p "$w" -c "$w/be.conf" & pids+=($!)
haproxy -f "$w/ha.cfg" & pids+=($!)
GOMAXPROCS=$P $A --listen 127.0.0.1:18181 --admin 127.0.0.1:18191 --service bench --upstreams backend=3 --resolve backend=127.0.0.1:18180 --chain-cap 4 --access-log off >/dev/null 2>"$w/a.err" & pids+=($!)
env GOMAXPROCS=$P $B_ENV $B --listen 127.0.0.1:18189 --admin 127.0.0.1:18192 --service bench --upstreams backend=3 --resolve backend=127.0.0.1:18180 --chain-cap 4 --access-log off $B_ARGS >/dev/null 2>"$w/b.err" & pids+=($!)
for port in 18180 18181 18182 18189; do for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done; done
for port in 18181 18182 18189; do wrk -t2 -c$CONNS -d1s -s "$w/f.lua" http://127.0.0.1:$port/ >/dev/null; done
bepid=$(pgrep -P ${pids[0]} | head -1)
csw() { awk '/voluntary_ctxt_switches/ {s+=$2} END {print s}' /proc/$bepid/status; }
hz=$(getconf CLK_TCK)
ours() { local t=0 p v; for p in "${pids[@]}" $(pgrep -P ${pids[0]}); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); t=$((t+${v:-0})); done; echo $t; }
busy() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }
# run PORT: "rps p99us csw foreign%" (foreign: the machine's busy time not ours or wrk's, % of 2 cores)
run() { local c0 c1 o0 o1 b0 b1 out wt; c0=$(csw); o0=$(ours); b0=$(busy)
	TIMEFORMAT="%U %S"; { time wrk -t2 -c$CONNS -d$DUR -s "$w/f.lua" http://127.0.0.1:$1/ >$w/out; } 2>$w/wt
	c1=$(csw); o1=$(ours); b1=$(busy); out=$(awk '/^RPS/ {print $2, $3}' $w/out)
	echo "$out $(( (c1-c0) )) $(awk -v b=$((b1-b0)) -v o=$((o1-o0)) -v hz=$hz -v d=${DUR%s} '{printf "%.1f", ((b - o) / hz - $1 - $2) * 100 / (2 * d)}' $w/wt)"; }
quiet() { local b0 b1 i0 i1; read b0 i0 <<<"$(awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $5+$6; exit}' /proc/stat)"; sleep 1; read b1 i1 <<<"$(awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $5+$6; exit}' /proc/stat)"; [ $(( (b1-b0)*100 / (b1-b0+i1-i0+1) )) -lt ${QUIET:-101} ]; }
good=0; start=$(date +%s)
while [ $good -lt $CYCLES ] && [ $(( $(date +%s) - start )) -lt ${MAXSEC:-100000} ]; do
	if ! quiet; then continue; fi
	read a ap ac af <<<"$(run 18181)"; read h hp hc hf <<<"$(run 18182)"; read b bp bc bf <<<"$(run 18189)"
	line=$(awk -v a=$a -v b=$b -v h=$h -v ap=$ap -v bp=$bp -v hp=$hp -v F=${FMAX:-5} -v af=$af -v bf=$bf -v hf=$hf -v ac=$ac -v bc=$bc -v hc=$hc -v d=${DUR%s} 'BEGIN{printf "A %s B %s H %s  A/H=%.3f B/H=%.3f B/A=%.3f  p99us A %s B %s H %s  be-csw/kreq A %.1f B %.1f H %.1f foreign%% %s %s %s %s\n", a,b,h,a/h,b/h,b/a,ap,bp,hp,ac*1000/(a*d),bc*1000/(b*d),hc*1000/(h*d),af,bf,hf,(af<F&&bf<F&&hf<F)?"GOOD":"noisy"}')
	echo "$line"
	case "$line" in *GOOD*) good=$((good+1));; esac
done
