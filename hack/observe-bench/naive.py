#!/usr/bin/env python3
"""The straightforward script observe's benchmark compares with: what an SRE would write for
the write-up's question over the same lines. It reads retrycap-proxy's JSON log (json.loads),
Istio's JSON format (json.loads) and Istio's default text format (one regular expression),
and keeps per key what observe keeps: first start, last end, the distinct trace ids, per
service the inbound and outbound attempts and failures. Then it prints the keys with more than
5 attempts (at a service with inbound lines only those count), worst first, and the summary.

    python3 naive.py < lines
"""
import json
import re
import sys
from datetime import datetime

TEXT = re.compile(r'^\[(\S+)\] "(\S+) (\S+) [^"]*" (\d+) \S+ \S+ \S+ "[^"]*" \S+ \S+ (\S+) \S+ "[^"]*" "[^"]*" "([^"]*)" '
                  r'"([^"]*)" "[^"]*" (\S+) \S+ \S+ \S+ (\S+) \S+$')


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def name(cluster, sni, authority):
    if cluster.startswith("inbound|"):
        if sni and sni.startswith("outbound_."):
            return sni.split("_.", 3)[3].split(".")[0], True
        return authority.split(":")[0].split(".")[0].lower(), True
    parts = cluster.split("|")
    if len(parts) == 4 and parts[3]:
        return parts[3].split(".")[0], False
    return authority.split(":")[0].split(".")[0].lower(), False


agg = {}
lines = bad = skipped = 0
for line in sys.stdin:
    lines += 1
    line = line.strip()
    trace = None
    try:
        if line.startswith("{"):
            d = json.loads(line)
            if d.get("log") == "retrycap-access":
                key = d.get("idempotency_key") or d.get("trace_id") or d.get("request_id") or d.get("storm_op")
                start = ts(d["time"])
                end = start + d.get("duration_us", 0) / 1e6
                svc, inbound, status = d.get("upstream"), False, d.get("status", 0)
                trace = d.get("trace_id")
            elif "start_time" in d:
                key = d.get("request_id")
                start = ts(d["start_time"])
                end = start + (d.get("duration") or 0) / 1e3
                svc, inbound = name(d.get("upstream_cluster") or "", d.get("requested_server_name"), d.get("authority") or "")
                status = int(d["response_code"])
            else:
                skipped += 1
                continue
        elif line.startswith("["):
            m = TEXT.match(line)
            if not m:
                bad += 1
                continue
            key = m.group(6)
            start = ts(m.group(1))
            end = start + int(m.group(5)) / 1e3
            svc, inbound = name(m.group(8), m.group(9), m.group(7))
            status = int(m.group(4))
        else:
            skipped += 1
            continue
    except (ValueError, KeyError):
        bad += 1
        continue
    if not key:
        continue
    a = agg.get(key)
    if a is None:
        a = agg[key] = [start, end, set(), {}]
    a[0] = min(a[0], start)
    a[1] = max(a[1], end)
    if trace:
        a[2].add(trace)
    s = a[3].get(svc)
    if s is None:
        s = a[3][svc] = [0, 0, 0, 0]
    failed = status == 0 or status >= 500 or status == 429
    if inbound:
        s[0] += 1
        s[2] += failed
    else:
        s[1] += 1
        s[3] += failed

rows = []
for key, (first, end, traces, svcs) in agg.items():
    attempts = sum(s[0] if s[0] else s[1] for s in svcs.values())
    failures = sum(s[2] if s[0] else s[3] for s in svcs.values())
    rows.append((attempts, key, len(traces), failures, first, end - first))
over = sorted((r for r in rows if r[0] > 5), key=lambda r: (-r[0], r[4], r[1]))
for r in over[:20]:
    print("%s\t%d attempts\t%d chain links\t%d failures\t%.1f s" % (r[1], r[0], r[2], r[3], r[5]))
print("%d keys with more than 5 attempts; peak %d; longest span %.1f s (%d keys); %d lines, %d bad, %d skipped" % (
    len(over), max((r[0] for r in rows), default=0), max((r[5] for r in rows), default=0), len(rows), lines, bad, skipped))
