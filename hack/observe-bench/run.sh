#!/usr/bin/env bash
# observe's benchmark (docs/benchmarks.md, "observe at gateway scale"): generates N lines over K
# keys (gen/), then runs in the same run, one after the other, over the same file:
#   observe (this tree), observe as built from BEFORE (a git revision, optional) and naive.py;
# each under /usr/bin/time: CPU seconds (user+sys) and peak RSS. Nothing is committed: the
# files go to a temporary directory, removed at the end.
#
#   hack/observe-bench/run.sh                        # N="1000000 10000000" K=100000
#   N=1000000 BEFORE=4f2a982 hack/observe-bench/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-"1000000 10000000"}
K=${K:-100000}
BEFORE=${BEFORE:-}
BEFORE_MAX=${BEFORE_MAX:-1000000} # the old observe keeps every line: ~1.3 GiB per million
work=$(mktemp -d /tmp/observe-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/retrycap" ./cmd/retrycap && go build -o "$work/gen" ./hack/observe-bench/gen)
if [ -n "$BEFORE" ]; then
	git -C "$root" worktree add -q --detach "$work/before-src" "$BEFORE"
	(cd "$work/before-src" && go build -o "$work/retrycap-before" ./cmd/retrycap)
	git -C "$root" worktree remove --force "$work/before-src"
fi
measure() { # label cmd...: prints "label cpu_s rss_mib"
	local label=$1
	shift
	/usr/bin/time -f "%U %S %M" -o "$work/t" "$@" >"$work/out.$label" 2>"$work/err.$label"
	read -r u s m <"$work/t"
	printf '%-14s cpu %7.2f s  peak RSS %7.1f MiB\n' "$label" "$(echo "$u + $s" | bc)" "$(echo "scale=1; $m / 1024" | bc)"
}
for n in $N; do
	"$work/gen" -n "$n" -k "$K" >"$work/log"
	echo "== $n lines, $K keys, $(du -m "$work/log" | cut -f1) MiB (load average $(cut -d' ' -f1-3 /proc/loadavg))"
	measure idle "$work/retrycap" observe -f /dev/null
	measure observe "$work/retrycap" observe -f "$work/log" --top 5
	if [ -n "$BEFORE" ] && [ "$n" -le "$BEFORE_MAX" ]; then measure observe-before "$work/retrycap-before" observe -f "$work/log" --top 5; fi
	measure naive.py python3 "$root/hack/observe-bench/naive.py" <"$work/log"
	tail -1 "$work/out.observe"
	cat "$work/err.observe"
	tail -1 "$work/out.naive.py"
done
