#!/usr/bin/env python3
"""p99sum.py: the paced shapes of a quick.sh run, summarised over its rounds.

Per round and paced shape quick.sh prints direct (the echo server without a
proxy), HAProxy, proxy A and B in turn, HAProxy again. The added p99 of a
contender is its p99 minus direct's in the same round. Printed per shape:
- paired by round (HAProxy's added p99 the mean of its two runs in the
  round): per contender the median over the rounds, and per proxy the median
  of its per-round difference to HAProxy's, with a 95 % bootstrap interval
  (10,000 resamples of the rounds, a fixed seed), and in how many rounds it
  was at or below HAProxy's, and at or below HAProxy's better run of the two;
- pooled (every run one sample; A and B together when they are one build,
  SAME=1): the median added p99 of each, and the difference of the medians
  with a 95 % bootstrap interval (each group resampled on its own).
A machine that stalls everything now and then (a 2-core VM: 20-60 ms p99s
for direct too) puts a few runs far out; medians and rank counts are what
such runs move least. Usage:
  ROUNDS=20 PIN=1 DUR=5s SHAPES='"64 64 2000"' \\
      internal/proxy/h2/grpcbench/quick.sh A B > run.txt
  internal/proxy/h2/grpcbench/p99sum.py run.txt
"""
import os
import random
import re
import statistics
import sys

UNITS = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}


def micros(text):
    """A Go duration (1.234ms, 456µs, 1m2s is not printed by grpcbench) in µs."""
    m = re.fullmatch(r"([0-9.]+)(ns|µs|us|ms|s)", text)
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def rounds(lines):
    """Yields (shape, {label: [p99 µs, ...]}) per round and paced shape."""
    cur = None
    for line in lines:
        if line.startswith("round "):
            if cur and cur[1]:
                yield cur
            cur = (None, {})
            continue
        m = re.match(r"(\S+) conns=(\d+) concurrency=(\d+) rate=(\d+) .*p99=(\S+)", line)
        if not m or cur is None or m.group(4) == "0":
            continue
        label, shape = m.group(1), f"{m.group(2)} conns, {m.group(3)} in flight, {m.group(4)}/s"
        cur = (shape, cur[1])
        cur[1].setdefault(label, []).append(micros(m.group(5)))
    if cur and cur[1]:
        yield cur


def median_ci(xs, n=10000, seed=1):
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return statistics.median(xs), meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def diff_ci(xs, ys, n=10000, seed=1):
    """Median of xs minus median of ys, with a 95 % bootstrap interval."""
    rnd = random.Random(seed)
    ds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) - statistics.median(rnd.choices(ys, k=len(ys)))
                for _ in range(n))
    return statistics.median(xs) - statistics.median(ys), ds[int(0.025 * n)], ds[int(0.975 * n) - 1]


def main(path, same):
    with open(path, encoding="utf-8") as f:
        by_shape = {}
        for shape, runs in rounds(f):
            if "direct" not in runs or "haproxy" not in runs:
                continue
            d = runs["direct"][0]
            added = {"haproxy": statistics.mean(runs["haproxy"]) - d,
                     "haproxy-best": min(runs["haproxy"]) - d,
                     "haproxy-runs": [x - d for x in runs["haproxy"]]}
            for label in ("A", "B"):
                if label in runs:
                    added[label] = runs[label][0] - d
            by_shape.setdefault(shape, []).append(added)
    if not by_shape:
        sys.exit(f"{path}: no paced round (direct, haproxy and a proxy) found")
    for shape, rs in by_shape.items():
        print(f"{shape}: {len(rs)} rounds")
        for label in ("haproxy", "A", "B"):
            xs = [r[label] for r in rs if label in r]
            if xs:
                print(f"  {label:8s} added p99 median {statistics.median(xs) / 1e3:+.2f} ms"
                      f" (q1 {sorted(xs)[len(xs) // 4] / 1e3:+.2f}, q3 {sorted(xs)[3 * len(xs) // 4] / 1e3:+.2f})")
        for label in ("A", "B"):
            diffs = [r[label] - r["haproxy"] for r in rs if label in r]
            if diffs:
                med, lo, hi = median_ci(diffs)
                le = sum(1 for x in diffs if x <= 0)
                best = sum(1 for r in rs if label in r and r[label] <= r["haproxy-best"])
                print(f"  {label} - haproxy: median {med / 1e3:+.2f} ms (95 % {lo / 1e3:+.2f} .. {hi / 1e3:+.2f}),"
                      f" at or below HAProxy in {le} of {len(diffs)}, below its better run in {best}")
        hap = [x for r in rs for x in r["haproxy-runs"]]
        groups = [("A+B", [r[k] for r in rs for k in ("A", "B") if k in r])] if same else \
            [(k, [r[k] for r in rs if k in r]) for k in ("A", "B")]
        for label, xs in groups:
            if xs:
                med, lo, hi = diff_ci(xs, hap)
                print(f"  pooled: {label} median added p99 {statistics.median(xs) / 1e3:+.2f} ms over {len(xs)} runs,"
                      f" HAProxy {statistics.median(hap) / 1e3:+.2f} ms over {len(hap)}:"
                      f" difference {med / 1e3:+.2f} ms (95 % {lo / 1e3:+.2f} .. {hi / 1e3:+.2f})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: p99sum.py FILE (quick.sh's output)")
    main(sys.argv[1], os.environ.get("SAME") == "1")
