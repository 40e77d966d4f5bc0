#!/usr/bin/env python3
"""schedtrace.py: where a runtime/trace of the proxy says its goroutines waited.

Reads `go tool trace -d=parsed TRACE` (no dependency beyond the Go
toolchain) and prints:
- the span, the share of it the P ran goroutines, GC cycles;
- per goroutine kind (the function it started in): how often it went from
  runnable to running, the wait between (p50, p99, max, how many over
  1 ms) and how long it then ran;
- for the waits over 1 ms: what the P did meanwhile (ran others: how many
  runs, the longest; or ran nothing), and which goroutine started each of
  the P's busy periods (what woke the process).
A trace of the proxy comes from a build with -tags rltrace
(internal/proxy/h2/rltrace_debug.go: RL_TRACE, RL_TRACE_AFTER, RL_TRACE_FOR).
Usage:
  go tool trace -d=parsed t.trace > t.txt && internal/proxy/h2/grpcbench/schedtrace.py t.txt
"""
import bisect
import collections
import re
import sys

EV = re.compile(r"^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$")
GST = re.compile(r"GoID=(\d+) (\w+)->(\w+)")
PST = re.compile(r"ProcID=(\d+) (\w+)->(\w+)")


def pct(v, p):
    return v[int((len(v) - 1) * p)] if v else 0


def us(ns):
    return "%.1fµs" % (ns / 1e3) if ns < 1e6 else "%.2fms" % (ns / 1e6)


def main(path):
    kind = {}          # goroutine -> the function it started in
    runnable = {}      # goroutine -> when it became runnable
    running = {}       # goroutine -> when it started running
    waits = collections.defaultdict(list)
    runs_by = collections.defaultdict(list)
    runs = []          # (start, end) of every goroutine run
    long_waits = []    # (start, end) of every wait over 1 ms
    pstart = {}
    pbusy = 0
    pfresh = False
    first = collections.Counter()
    gc = 0
    t0 = t1 = None
    pend = None        # a goroutine transition whose stack follows
    in_stack = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("TransitionStack="):
                in_stack = True
                continue
            if in_stack:
                if line.startswith("\t") and not line.startswith("\t\t"):
                    if pend is not None:  # the last frame: the function it started in
                        kind[pend] = line.strip().split(" @ ")[0].rsplit("/", 1)[-1]
                    continue
                if line.startswith("\t\t"):
                    continue
                in_stack = False
                pend = None
            m = EV.match(line)
            if not m:
                continue
            t = int(m.group(5))
            t0 = t if t0 is None else t0
            t1 = t
            typ, rest = m.group(4), m.group(6)
            if typ == "RangeBegin" and "GC concurrent" in rest:
                gc += 1
            if typ != "StateTransition":
                continue
            g = GST.search(rest)
            if g:
                gid, frm, to = g.group(1), g.group(2), g.group(3)
                if not kind.get(gid):
                    pend = gid  # a goroutine older than the trace: named by its first stack
                    kind[gid] = ""
                if to == "Runnable":
                    runnable[gid] = t
                elif to == "Running":
                    k = kind.get(gid, "")
                    if pfresh:
                        first[k] += 1
                        pfresh = False
                    if frm == "Runnable" and gid in runnable:
                        w = t - runnable.pop(gid)
                        waits[k].append(w)
                        if w > 1_000_000:
                            long_waits.append((t - w, t))
                    running[gid] = t
                if frm == "Running" and gid in running:
                    s = running.pop(gid)
                    runs.append((s, t))
                    runs_by[kind.get(gid, "")].append(t - s)
                continue
            p = PST.search(rest)
            if p:
                pid, frm, to = p.group(1), p.group(2), p.group(3)
                if to == "Running":
                    pstart[pid] = t
                    pfresh = True
                elif frm == "Running" and pid in pstart:
                    pbusy += t - pstart.pop(pid)
    span = (t1 - t0) if t0 is not None else 0
    print("span %s, P running goroutines %s (%.1f %%), GC cycles %d" % (us(span), us(pbusy), 100 * pbusy / max(span, 1), gc))
    allw = sorted(w for v in waits.values() for w in v)
    print("runnable->running, all: n=%d p50=%s p90=%s p99=%s max=%s" % (len(allw), us(pct(allw, .5)), us(pct(allw, .9)), us(pct(allw, .99)), us(pct(allw, 1))))
    for k in sorted(waits, key=lambda k: -len(waits[k])):
        w = sorted(waits[k])
        r = sorted(runs_by[k])
        if len(w) < 20:
            continue
        print("  %-40s n=%6d wait p50=%9s p99=%9s max=%9s >1ms=%5d | run p50=%s p99=%s max=%s" % (
            k or "?", len(w), us(pct(w, .5)), us(pct(w, .99)), us(pct(w, 1)), sum(1 for x in w if x > 1_000_000),
            us(pct(r, .5)), us(pct(r, .99)), us(pct(r, 1))))
    runs.sort()
    starts = [s for s, _ in runs]
    if long_waits:
        tw = tr = tm = nr = 0
        for a, b in long_waits:
            i = max(bisect.bisect_left(starts, a) - 1, 0)
            cov = mx = k = 0
            while i < len(runs) and runs[i][0] < b:
                s, e = max(runs[i][0], a), min(runs[i][1], b)
                if e > s:
                    cov += e - s
                    mx = max(mx, e - s)
                    k += 1
                i += 1
            tw += b - a
            tr += cov
            tm += mx
            nr += k
        n = len(long_waits)
        print("waits over 1 ms: %d, mean %s; meanwhile the P ran others %s (%.1f runs, the longest %s), nothing %s" % (
            n, us(tw / n), us(tr / n), nr / n, us(tm / n), us((tw - tr) / n)))
    print("what started the P's busy periods:", ", ".join("%s %d" % (k or "?", v) for k, v in first.most_common(6)))


if __name__ == "__main__":
    main(sys.argv[1])
