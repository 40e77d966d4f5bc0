#!/usr/bin/env bash
# observe's benchmark (docs/benchmarks.md, "observe at gateway scale"): generates N lines over K
# keys (gen/), then runs in the same run, one after the other, over the same file:
#   observe (this tree: `retrycap` and the kubectl plugin `kubectl-retrycap`), observe as built
#   from BEFORE (a git revision, optional) and naive.py;
# each under /usr/bin/time: CPU seconds (user+sys) and peak RSS. Nothing is committed: the
# files go to a temporary directory, removed at the end.
#
# The binaries are built as `make build` builds them (CGO_ENABLED=0; a cgo build links
# externally and, kustomize's API importing package plugin, exports every symbol: 49 MiB idle
# instead of 42) and measured as an installed binary is run: read from disk, not from the
# page cache the linker wrote. On kernels with large page-cache folios for files (6.18 here)
# the linker's output sits in the cache in folios of up to 2 MiB that are mapped whole at the
# first touch, so a binary run straight after `go build` has a larger idle RSS (50 MiB instead
# of 42 for retrycap, 78 instead of 49 for a cgo build) than the same bytes after a reboot or a
# copy. `evict` drops the file's pages (fsync, then POSIX_FADV_DONTNEED on that file only);
# `idle-linked` shows the figure before it.
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
(cd "$root" && CGO_ENABLED=0 go build -o "$work/retrycap" ./cmd/retrycap &&
	CGO_ENABLED=0 go build -o "$work/kubectl-retrycap" ./cmd/kubectl-retrycap && go build -o "$work/gen" ./hack/observe-bench/gen)
if [ -n "$BEFORE" ]; then
	git -C "$root" worktree add -q --detach "$work/before-src" "$BEFORE"
	(cd "$work/before-src" && CGO_ENABLED=0 go build -o "$work/retrycap-before" ./cmd/retrycap)
	git -C "$root" worktree remove --force "$work/before-src"
fi
evict() { # drops the page cache of the named files only
	python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"
}
measure() { # label cmd...: prints "label cpu_s rss_mib"
	local label=$1
	shift
	local rc=0
	/usr/bin/time -f "%U %S %M" -o "$work/t" "$@" >"$work/out.$label" 2>"$work/err.$label" || rc=$?
	# observe exits 2 when it read no access-log line: expected of the idle runs (/dev/null).
	if [ "$rc" -ne 0 ] && ! { [ "$rc" -eq 2 ] && [[ $label == *idle* ]]; }; then
		cat "$work/err.$label" >&2
		return "$rc"
	fi
	read -r u s m < <(tail -1 "$work/t") # on a non-zero exit time writes "Command exited with non-zero status N" first
	printf '%-14s cpu %7.2f s  peak RSS %7.1f MiB\n' "$label" "$(echo "$u + $s" | bc)" "$(echo "scale=1; $m / 1024" | bc)"
}
measure idle-linked "$work/retrycap" observe -f /dev/null # straight after go build
evict "$work"/retrycap* "$work/kubectl-retrycap"
for n in $N; do
	"$work/gen" -n "$n" -k "$K" >"$work/log"
	echo "== $n lines, $K keys, $(du -m "$work/log" | cut -f1) MiB (load average $(cut -d' ' -f1-3 /proc/loadavg))"
	measure idle "$work/retrycap" observe -f /dev/null
	measure observe "$work/retrycap" observe -f "$work/log" --top 5
	measure plugin-idle "$work/kubectl-retrycap" observe -f /dev/null
	measure plugin "$work/kubectl-retrycap" observe -f "$work/log" --top 5
	if [ -n "$BEFORE" ] && [ "$n" -le "$BEFORE_MAX" ]; then measure observe-before "$work/retrycap-before" observe -f "$work/log" --top 5; fi
	measure naive.py python3 "$root/hack/observe-bench/naive.py" <"$work/log"
	tail -1 "$work/out.observe"
	cat "$work/err.observe"
	tail -1 "$work/out.naive.py"
	echo "   (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
done
