#!/usr/bin/env python3
"""Writes the gateway/ and mixed/ test logs and, independently of observe's code, the answer
they must give (expected.json): the answer comes from the events the script models, not from
reading the lines back. Run once; its output is committed:

    cd internal/observe/testdata && python3 make_logs.py

The formats (see README.md for their sources):
- Istio's default text format and JSON format (istio/istio pilot/pkg/model/telemetry_logging.go,
  EnvoyTextLogFormat and EnvoyJSONLogFormatIstio);
- Envoy's default format (Envoy's docs, "Default format string");
- retrycap-proxy's access log (docs/observe.md);
- the kubelet's CRI log file lines ("TIMESTAMP stdout F LINE", P for a partial line) and
  kubectl logs --prefix --timestamps ("[pod/NAME/CONTAINER] TIMESTAMP LINE").
"""
import datetime as dt
import gzip
import json
import os
import random

rnd = random.Random(31)
T0 = dt.datetime(2026, 11, 24, 14, 2, 11, 118000, tzinfo=dt.timezone.utc)


def ms(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def us(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%06dZ" % t.microsecond


def ns(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%06d123Z" % t.microsecond


def istio_text(start, method, path, code, flags, dur, rid, authority, cluster, sni, upstream_host="10.44.2.17:8080"):
    return ('[%s] "%s %s HTTP/1.1" %d %s via_upstream - "-" 412 91 %d %s "-" "Mozilla/5.0" "%s" "%s" "%s" %s '
            '127.0.0.6:43611 10.44.2.17:8080 10.44.1.23:37943 %s default') % (
        ms(start), method, path, code, flags, dur, dur if code != 0 else "-", rid, authority, upstream_host, cluster, sni)


def istio_json(start, method, path, code, flags, dur, rid, authority, cluster, sni):
    # the key order Envoy writes is not fixed (SortProperties false); shuffle it
    d = {"authority": authority, "bytes_received": 412, "bytes_sent": 91, "connection_termination_details": None,
         "downstream_local_address": "10.44.2.17:8080", "downstream_remote_address": "10.44.1.23:41120",
         "duration": dur, "method": method, "path": path, "protocol": "HTTP/1.1", "request_id": rid,
         "requested_server_name": sni, "response_code": code, "response_code_details": "via_upstream",
         "response_flags": flags, "route_name": "default", "start_time": ms(start), "upstream_cluster": cluster,
         "upstream_host": "10.44.3.9:8080", "upstream_local_address": "127.0.0.6:39021",
         "upstream_service_time": str(dur), "upstream_transport_failure_reason": None,
         "user_agent": "Mozilla/5.0 (X11; Linux x86_64) \"quoted\"", "x_forwarded_for": "203.0.113.7"}
    items = list(d.items())
    rnd.shuffle(items)
    return json.dumps(dict(items), separators=(",", ":"))


def envoy_default(start, method, path, code, flags, dur, rid, authority):
    return '[%s] "%s %s HTTP/1.1" %d %s 0 91 %d %d "-" "curl/8.5.0" "%s" "%s" "10.44.4.2:8080"' % (
        ms(start), method, path, code, flags, dur, dur, rid, authority)


def retrycap(start, service, upstream, attempt, status, dur_us, idem, trace, method="POST"):
    d = {"log": "retrycap-access", "time": us(start), "service": service, "upstream": upstream, "method": method,
         "authority": upstream + ":8080", "path": "/pay", "attempt": attempt, "budget_in": 4, "budget_out": 1,
         "status": status, "duration_us": dur_us}
    if trace:
        d["trace_id"] = trace
    if idem:
        d["idempotency_key"] = idem
    return json.dumps(d, separators=(",", ":"))


class Answer:
    """The truth per key, from the modelled attempts."""

    def __init__(self):
        self.keys = {}

    def attempt(self, key, kind, service, start, dur_ms, failed, trace=None):
        k = self.keys.setdefault(key, {"kind": kind, "attempts": 0, "failures": 0, "traces": set(), "services": {},
                                       "first": start, "end": start})
        k["attempts"] += 1
        k["failures"] += 1 if failed else 0
        k["services"][service] = k["services"].get(service, 0) + 1
        if trace:
            k["traces"].add(trace)
        k["first"] = min(k["first"], start)
        k["end"] = max(k["end"], start + dt.timedelta(milliseconds=dur_ms))

    def touch(self, key, start, dur_ms):
        """A line that is not an attempt of its own (a caller's outbound line of attempts the
        callee logged) still bounds the span."""
        k = self.keys[key]
        k["first"] = min(k["first"], start)
        k["end"] = max(k["end"], start + dt.timedelta(milliseconds=dur_ms))

    def dump(self):
        out = {}
        for key, k in sorted(self.keys.items()):
            span = k["end"] - k["first"]
            out[key] = {"kind": k["kind"], "attempts": k["attempts"], "chain_links": len(k["traces"]),
                        "failures": k["failures"], "services": k["services"], "first": us(k["first"]),
                        "span_us": span.days * 86400_000_000 + span.seconds * 1_000_000 + span.microseconds}
        return out


def gateway():
    """An Istio ingress gateway in front of frontend, which calls checkout. The browser's Host is
    shop.example.com; the sidecars' inbound lines carry it as :authority, their SNI names the
    service. The gateway retries frontend, frontend's sidecar retries checkout: per browser
    request up to 3 attempts at frontend and 3 at checkout per frontend attempt."""
    ans = Answer()
    gw, fe, co = [], [], []  # (start, line)
    for i in range(24):
        rid = "5e0d%04x-1f2a-4e8d-8c7b-%012x" % (i, rnd.getrandbits(48))
        start = T0 + dt.timedelta(seconds=7 * i, milliseconds=rnd.randrange(0, 900))
        fe_tries = rnd.choice([1, 1, 2, 3, 3])
        t = start
        gw_dur = 0
        ok = False
        for a in range(fe_tries):
            fe_start = t + dt.timedelta(milliseconds=1)
            co_tries = rnd.choice([1, 3, 3]) if a < fe_tries - 1 or fe_tries == 3 else 1
            ct = fe_start + dt.timedelta(milliseconds=1)
            co_ok = False
            for c in range(co_tries):
                last = c == co_tries - 1
                code = 200 if (last and fe_tries < 3 and a == fe_tries - 1) else 503
                dur = rnd.randrange(2, 40)
                co.append((ct, istio_text(ct, "POST", "/checkout?cart=%d" % i, code, "-", dur, rid, "checkout:8080",
                                          "inbound|8080||", "outbound_.8080_._.checkout.shop.svc.cluster.local")))
                ans.attempt(rid, "request-id", "checkout", ct, dur, code >= 500)
                ct += dt.timedelta(milliseconds=dur + 25)
                co_ok = code == 200
            fe_code = 200 if co_ok else 503
            fe_dur = int((ct - fe_start).total_seconds() * 1000) + 1
            # frontend's sidecar: its outbound line to checkout (one per call), its inbound line
            fe.append((fe_start + dt.timedelta(milliseconds=1),
                       istio_json(fe_start + dt.timedelta(milliseconds=1), "POST", "/checkout", 200 if co_ok else 503,
                                  "URX" if co_tries > 1 and not co_ok else "-", fe_dur - 2, rid, "checkout:8080",
                                  "outbound|8080||checkout.shop.svc.cluster.local", None)))
            ans.touch(rid, fe_start + dt.timedelta(milliseconds=1), fe_dur - 2)
            fe.append((fe_start, istio_json(fe_start, "POST", "/cart/buy", fe_code, "-", fe_dur, rid, "shop.example.com",
                                            "inbound|8080||", "outbound_.8080_._.frontend.shop.svc.cluster.local")))
            ans.attempt(rid, "request-id", "frontend", fe_start, fe_dur, fe_code >= 500)
            t = fe_start + dt.timedelta(milliseconds=fe_dur + 25)
            ok = fe_code == 200
        gw_dur = int((t - start).total_seconds() * 1000)
        gw.append((start, istio_text(start, "POST", "/cart/buy?session=abc", 200 if ok else 503, "-" if ok else "URX",
                                     gw_dur, rid, "shop.example.com", "outbound|8080||frontend.shop.svc.cluster.local",
                                     "shop.example.com", "10.44.2.17:8080")))
        ans.touch(rid, start, gw_dur)
    stats = {"lines": 0, "attempts": 0, "skipped": 0, "bad": 0, "too_long": 0}

    os.makedirs("gateway/frontend", exist_ok=True)
    # the gateway's container log as kubectl logs prints it, with Envoy's and the agent's own lines
    with open("gateway/istio-ingressgateway.log", "w") as f:
        f.write("2026-11-24T14:02:10.998111Z\tinfo\tEnvoy proxy is ready\n")
        f.write("[2026-11-24 13:47:51.233][1][info][main] [source/server/server.cc:404] initializing epoch 0\n")
        f.write("[2026-11-24 13:47:51.240][1][warning][config] [source/common/config/grpc_stream.h:191] stream closed\n")
        stats["skipped"] += 3
        for _, line in sorted(gw):
            f.write(line + "\n")
            stats["attempts"] += 1
    # frontend's: the kubelet's CRI file on the node; one line split by the runtime (P, P, F)
    with open("gateway/frontend/0.log", "w") as f:
        lines = [l for _, l in sorted(fe)]
        for n, line in enumerate(lines):
            ts = ns(T0 + dt.timedelta(milliseconds=n))
            if n == 5:
                f.write("%s stdout P %s\n" % (ts, line[:100]))
                f.write("%s stdout P %s\n" % (ts, line[100:250]))
                f.write("%s stdout F %s\n" % (ts, line[250:]))
            else:
                f.write("%s stdout F %s\n" % (ts, line))
            stats["attempts"] += 1
        f.write("%s stderr F 2026-11-24T14:02:13.000000Z\twarning\tenvoy config\tgRPC config stream closed\n" % ns(T0))
        stats["skipped"] += 1
    # checkout's: kubectl logs --prefix --timestamps, the older half rotated and gzip'd, the
    # newer half cut by --limit-bytes in the middle of its last line
    lines = [l for _, l in sorted(co)]
    half = len(lines) // 2
    pre = "[pod/checkout-7d9f8c6b5-x2k4q/istio-proxy] "
    with gzip.open("gateway/checkout.log.1.gz", "wt") as f:
        for n, line in enumerate(lines[:half]):
            f.write("%s%s %s\n" % (pre, ns(T0 + dt.timedelta(milliseconds=n)), line))
            stats["attempts"] += 1
    with open("gateway/checkout.log", "w") as f:
        for n, line in enumerate(lines[half:]):
            f.write("%s%s %s\n" % (pre, ns(T0 + dt.timedelta(seconds=1, milliseconds=n)), line))
            stats["attempts"] += 1
        # a further line cut after exactly 13 fields (the Envoy format's count): bad, not an attempt
        extra = istio_text(T0 + dt.timedelta(minutes=9), "POST", "/checkout", 503, "-", 5, "cut-line-rid",
                           "checkout:8080", "inbound|8080||", "outbound_.8080_._.checkout.shop.svc.cluster.local")
        cut = extra[:extra.index(' "Mozilla')]
        f.write("%s%s %s" % (pre, ns(T0 + dt.timedelta(minutes=9)), cut))
        stats["bad"] += 1
    stats["lines"] = stats["attempts"] + stats["skipped"] + stats["bad"]
    return ans, stats


def mixed():
    """retrycap-proxy's log of a chain web -> order -> payment keyed by Idempotency-Key, where
    the user retried (new trace ids: the chain links); Envoy default lines of another service;
    one Istio JSON line; the proxy's own lines; a truncated JSON line; an Istio text line with a
    field missing."""
    ans = Answer()
    out = []  # (line, kind)
    t = dt.datetime(2026, 11, 24, 15, 0, 0, 250000, tzinfo=dt.timezone.utc)
    for i in range(6):
        idem = "order-%d" % (100 + i)
        user_tries = [1, 5, 2, 1, 3, 1][i]
        for u in range(user_tries):
            trace = "%032x" % rnd.getrandbits(128)
            for a in range(1, 4 if i % 2 else 2):
                st = 503 if (a < 3 and i % 2) or (u < user_tries - 1) else 200
                dur = rnd.randrange(500, 90000)
                out.append((retrycap(t, "web", "order", a, st, dur, idem, trace), "attempt"))
                ans.attempt(idem, "idempotency-key", "order", t, dur / 1000, st >= 500, trace)
                pt = t + dt.timedelta(microseconds=300)
                for b in range(1, 3):
                    pst = 503 if st == 503 or b == 1 else 200
                    pdur = rnd.randrange(100, 400)
                    out.append((retrycap(pt, "order", "payment", b, pst, pdur, idem, trace), "attempt"))
                    ans.attempt(idem, "idempotency-key", "payment", pt, pdur / 1000, pst >= 500, trace)
                    pt += dt.timedelta(microseconds=pdur + 50)
                t += dt.timedelta(microseconds=dur + 1000)
            t += dt.timedelta(seconds=rnd.randrange(20, 200), milliseconds=rnd.randrange(0, 999))
    # one user request retried over minutes: a span of 195.6 s (not "3 min")
    tl = dt.datetime(2026, 11, 24, 16, 0, 0, 0, tzinfo=dt.timezone.utc)
    for n, off in enumerate([0, 60_000, 120_000, 195_500]):
        s = tl + dt.timedelta(milliseconds=off)
        out.append((retrycap(s, "web", "order", 1, 503, 100_000, "slow-1", "%032x" % (n + 1)), "attempt"))
        ans.attempt("slow-1", "idempotency-key", "order", s, 100, True, "%032x" % (n + 1))
    # Envoy's default format at a plain Envoy in front of catalog (no cluster: named by :authority)
    e0 = dt.datetime(2026, 11, 24, 14, 6, 0, 0, tzinfo=dt.timezone.utc)
    for k in range(3):
        rid = "5d4c3b2a-1908-4f7e-8d6c-5b4a3928170%d" % k
        for a in range(k + 2):
            s = e0 + dt.timedelta(seconds=k, milliseconds=40 * a)
            code = 503 if a < k + 1 else 200
            out.append((envoy_default(s, "GET", "/catalog?page=%d" % a, code, "UF" if code == 503 else "-", 9 + a, rid,
                                      "Catalog.shop:8080"), "attempt"))
            ans.attempt(rid, "request-id", "catalog", s, 9 + a, code >= 500)
    # one Istio JSON inbound line at payment, named by its SNI
    s = dt.datetime(2026, 11, 24, 14, 5, 0, 10000, tzinfo=dt.timezone.utc)
    out.append((istio_json(s, "POST", "/pay?card=4242", 200, "-", 3, "e2d1c0b9-a8f7-4e6d-9c5b-4a3928171605", "payment:8080",
                           "inbound|8080||", "outbound_.8080_._.payment.shop.svc.cluster.local"), "attempt"))
    ans.attempt("e2d1c0b9-a8f7-4e6d-9c5b-4a3928171605", "request-id", "payment", s, 3, False)
    attempts = [l for l in out]
    rnd.shuffle(attempts)  # interleaved, as several containers' logs merged
    junk = [
        ("2026/11/24 15:00:00 retrycap-proxy: listening on :15001", "skipped"),
        ("", "skipped"),
        ('{"level":"info","msg":"config reloaded"}', "skipped"),
        (retrycap(t, "web", "order", 1, 503, 1000, "cut-1", None)[:60], "bad"),  # cut in a string
        (istio_text(e0, "GET", "/x", 200, "-", 1, "rid-x", "x:80", "inbound|80||", "-").rsplit(" ", 1)[0], "bad"),  # 21 fields
        ('[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 200 - 0 91 9 8 "-" "curl/8.5.0" "r-9" "catalog:8080"', "bad"),  # 12
    ]
    lines = attempts[:10] + junk[:3] + attempts[10:40] + junk[3:] + attempts[40:]
    stats = {"lines": len(lines), "attempts": sum(1 for _, k in lines if k == "attempt"),
             "skipped": sum(1 for _, k in lines if k == "skipped"), "bad": sum(1 for _, k in lines if k == "bad"),
             "too_long": 0}
    with open("mixed/mixed.log", "w") as f:
        for l, _ in lines:
            f.write(l + "\n")
    return ans, stats


if __name__ == "__main__":
    g, gs = gateway()
    m, ms_ = mixed()
    with open("expected.json", "w") as f:
        json.dump({"gateway": {"stats": gs, "keys": g.dump()}, "mixed": {"stats": ms_, "keys": m.dump()}}, f,
                  indent=1, sort_keys=True)
        f.write("\n")
