"""grpcio (Debian's python3-grpcio, gRPC's C-core) as a sidecar's gRPC app
uses it: an insecure channel to NAME:PORT, the proxy from grpc_proxy or
http_proxy (C-core then sends an HTTP CONNECT to the proxy and speaks h2c
inside). Generic unary calls with raw bytes: no stubs, no protoc
(pyclient_test.go).

plan: {"target": "order:50051",
       "calls": [{"method": "/py.Test/Flaky", "request": str,
                  "timeout": seconds | null, "metadata": [[k, v]...]}]}
Writes {"results": [{"code", "details", "response", "initial", "trailing",
"elapsed"}...], "version": grpc.__version__}.
"""

import json
import sys
import time

import grpc


def pairs(md):
    return [[k, v if isinstance(v, str) else v.decode("latin-1")] for k, v in (md or ())]


def main():
    plan = json.load(sys.stdin)
    out = []
    # No service config, so C-core's own retries (a retryPolicy) are off:
    # only the proxy retries.
    with grpc.insecure_channel(plan["target"]) as ch:
        for c in plan["calls"]:
            # No serializers: the request and the answer are raw bytes.
            call = ch.unary_unary(c["method"])
            start = time.monotonic()
            try:
                resp, info = call.with_call(c["request"].encode(), timeout=c.get("timeout"),
                                            metadata=[tuple(m) for m in c.get("metadata", [])])
                out.append({"code": "OK", "details": "", "response": resp.decode("latin-1"),
                            "initial": pairs(info.initial_metadata()), "trailing": pairs(info.trailing_metadata()),
                            "elapsed": time.monotonic() - start})
            except grpc.RpcError as e:
                out.append({"code": e.code().name, "details": e.details() or "", "response": None,
                            "initial": pairs(e.initial_metadata()), "trailing": pairs(e.trailing_metadata()),
                            "elapsed": time.monotonic() - start})
    json.dump({"results": out, "version": grpc.__version__}, sys.stdout)


if __name__ == "__main__":
    main()
