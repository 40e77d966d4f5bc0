"""requests (Debian's python3-requests, on Debian's urllib3) from many
threads at once through one Session, as a threaded app's sidecar sees it
(h1red19_clients_test.go): keyless POSTs, urllib3's Retry(total=3) mounted
(it re-sends on a connection error before the request went out, never a
POST whose request was sent), the proxy from http_proxy.

plan: {"threads": n, "url": prefix (the thread's number is appended),
       "body_size": bytes}
Writes {"results": [{"status", "body", "error"}...]} in thread order.
"""

import json
import sys
import threading

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


def main():
    plan = json.load(sys.stdin)
    n = plan["threads"]
    s = requests.Session()  # trust_env: the proxy comes from http_proxy
    s.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=n,
                                   max_retries=Retry(total=3, backoff_factor=0, raise_on_status=False)))
    body = b"x" * plan["body_size"]
    results = [None] * n

    def one(i):
        try:
            r = s.post(plan["url"] + str(i), data=body, timeout=20)
            results[i] = {"status": r.status_code, "body": r.text, "error": ""}
        except Exception as e:  # reported, judged by the test
            results[i] = {"status": 0, "body": "", "error": type(e).__name__ + ": " + str(e)}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
