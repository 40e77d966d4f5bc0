"""Python's standard library as a sidecar's app uses it: urllib.request and
http.client reaching retrycap-proxy through http_proxy (pyclient_test.go).

Reads a plan (JSON) on stdin and writes one result per request (JSON) on
stdout; the Go test asserts on both ends. A client-side failure is a result
("error"), never a silent pass.

plan: {"client": "urllib" | "http.client",
       "requests": [{"method", "url", "headers": [[name, value]...],
                     "body": str | null, "chunks": [str...] | null,
                     "expect": bool}]}
"""

import http.client
import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request


def result(status, reason, headers, body, **extra):
    out = {"status": status, "reason": reason, "headers": [[k, v] for k, v in headers],
           "body": body.decode("latin-1")}
    out.update(extra)
    return out


def via_urllib(plan):
    # ProxyHandler() with no argument reads http_proxy, as an app does.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler())
    out = []
    for r in plan["requests"]:
        data = r["body"].encode() if r.get("body") is not None else None
        # urllib's add_header capitalizes names (Idempotency-key,
        # Retrycap-deadline): the proxy must match them case-insensitively.
        req = urllib.request.Request(r["url"], data=data, method=r["method"])
        for k, v in r.get("headers", []):
            req.add_header(k, v)
        try:
            with opener.open(req, timeout=20) as resp:
                out.append(result(resp.status, resp.reason, resp.headers.items(), resp.read()))
        except urllib.error.HTTPError as e:
            out.append(result(e.code, e.reason, e.headers.items(), e.read()))
        except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    return out


def read_interim(sock):
    """Reads one answer head off the socket (http.client has no API to wait
    for a 100 Continue: it only skips one in getresponse)."""
    sock.settimeout(10)
    head = b""
    while b"\r\n\r\n" not in head:
        b = sock.recv(1)
        if not b:
            break
        head += b
    return head.decode("latin-1")


def via_http_client(plan):
    proxy = urllib.parse.urlsplit(os.environ["http_proxy"])
    # One connection for the whole plan (keep-alive); http.client reopens it
    # when the proxy closed it (auto_open).
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
    out = []
    for r in plan["requests"]:
        hdrs = dict(r.get("headers", []))
        try:
            interim = None
            if r.get("expect"):
                body = r["body"].encode()
                conn.putrequest(r["method"], r["url"], skip_accept_encoding=True)
                for k, v in r.get("headers", []):
                    conn.putheader(k, v)
                conn.putheader("Content-Length", str(len(body)))
                conn.putheader("Expect", "100-continue")
                conn.endheaders()
                interim = read_interim(conn.sock)
                if interim.startswith("HTTP/1.1 100 "):
                    conn.send(body)
                else:
                    # A final answer instead of 100: the body is not sent.
                    out.append({"interim": interim, "error": "no 100 Continue"})
                    conn.close()
                    continue
            elif r.get("chunks") is not None:
                # An iterable body without Content-Length: http.client sends
                # it chunked, one chunk per item.
                conn.request(r["method"], r["url"], body=iter([c.encode() for c in r["chunks"]]),
                             headers=hdrs, encode_chunked=True)
            else:
                body = r["body"].encode() if r.get("body") is not None else None
                conn.request(r["method"], r["url"], body=body, headers=hdrs)
            resp = conn.getresponse()
            body = resp.read()
            extra = {"will_close": resp.will_close}
            if interim is not None:
                extra["interim"] = interim
            out.append(result(resp.status, resp.reason, resp.getheaders(), body, **extra))
        except Exception as e:  # noqa: BLE001
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
            conn.close()
    conn.close()
    return out


def main():
    plan = json.load(sys.stdin)
    if plan["client"] == "urllib":
        out = via_urllib(plan)
    elif plan["client"] == "http.client":
        out = via_http_client(plan)
    else:
        sys.exit("unknown client %r" % plan["client"])
    json.dump({"results": out}, sys.stdout)


if __name__ == "__main__":
    main()
