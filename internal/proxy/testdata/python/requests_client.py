"""requests (Debian's python3-requests, on Debian's urllib3) as a sidecar's
app uses it: one Session, keep-alive, the proxy from http_proxy
(pyclient_test.go).

plan: {"retry": null | {"total": int, "status_forcelist": [int...]},
       "requests": [{"method", "url", "headers": [[name, value]...],
                     "body": str | null, "chunks": [str...] | null}]}
Writes {"results": [...], "connections": n, "versions": {...}}: n is how many
connections urllib3 opened to the proxy for the whole plan.
"""

import json
import sys

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


def main():
    plan = json.load(sys.stdin)
    s = requests.Session()  # trust_env: the proxy comes from http_proxy
    if plan.get("retry"):
        # What an app adds when it wants retries of its own: urllib3's
        # Retry, which knows nothing of the proxy's (they multiply).
        r = plan["retry"]
        adapter = HTTPAdapter(max_retries=Retry(total=r["total"], status_forcelist=r["status_forcelist"],
                                                backoff_factor=0, raise_on_status=False))
        s.mount("http://", adapter)
    out = []
    for r in plan["requests"]:
        if r.get("chunks") is not None:
            chunks = [c.encode() for c in r["chunks"]]
            # A generator body: requests sends it chunked.
            data = (c for c in chunks)
        else:
            data = r["body"].encode() if r.get("body") is not None else None
        try:
            resp = s.request(r["method"], r["url"], data=data, headers=dict(r.get("headers", [])), timeout=20)
            out.append({"status": resp.status_code, "reason": resp.reason,
                        "headers": [[k, v] for k, v in resp.headers.items()],
                        "body": resp.content.decode("latin-1")})
        except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    conns = 0
    adapter = s.get_adapter("http://x/")
    for pm in adapter.proxy_manager.values():
        for key in pm.pools.keys():
            conns += pm.pools[key].num_connections
    json.dump({"results": out, "connections": conns,
               "versions": {"requests": requests.__version__, "urllib3": urllib3.__version__}}, sys.stdout)


if __name__ == "__main__":
    main()
