package node

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/labapp"
)

// grpcTier is one tier of the gRPC storm chain: the lab app in gRPC mode (cmd/lab-app
// --protocol grpc) serving the Chain service on 8080, its counters on 8081, calling its
// upstream by its Service's name through HTTPS_PROXY (the sidecar, when injected).
const grpcTier = `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: __NAME__, namespace: NS}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: __NAME__}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: __NAME__, app.kubernetes.io/part-of: storm}
      annotations: {retrycap.dev/upstreams: "__UPSTREAM__=__DECLARED__"}
    spec:
      containers:
      - name: app
        image: retrycap/lab-app:v0.1.0
        env:
        - {name: LAB_PROTOCOL, value: grpc}
        - {name: LAB_UPSTREAMS, value: "__UPSTREAM__:8080"}
        - {name: LAB_ATTEMPTS, value: "__APP__"}
        - {name: LAB_FAIL, value: "__FAIL__"}
        readinessProbe: {httpGet: {path: /_labapp/stats, port: 8081}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: __NAME__, namespace: NS}
spec: {selector: {app.kubernetes.io/name: __NAME__}, ports: [{name: grpc, port: 8080, appProtocol: grpc}]}
`

// grpcChain is the storm chain frontend -> checkout -> billing -> payment in gRPC, payment failing
// (UNAVAILABLE to every call); the apps try __APP__ times and declare __DECLARED__ attempts.
func grpcChain(ns, declared, app string) string {
	var b strings.Builder
	tiers := []string{"frontend", "checkout", "billing", "payment"}
	for i, name := range tiers {
		up, fail := "", "0"
		if i+1 < len(tiers) {
			up = tiers[i+1]
		} else {
			fail = "1"
		}
		doc := strings.NewReplacer("__NAME__", name, "__UPSTREAM__", up, "__FAIL__", fail).Replace(grpcTier)
		if up == "" {
			// The leaf: no upstream, no declaration.
			doc = strings.NewReplacer(`        - {name: LAB_UPSTREAMS, value: ":8080"}`+"\n", "",
				`      annotations: {retrycap.dev/upstreams: "=__DECLARED__"}`+"\n", "").Replace(doc)
		}
		b.WriteString(doc)
	}
	return strings.NewReplacer("NS", ns, "__DECLARED__", declared, "__APP__", app).Replace(b.String())
}

// grpcUsers makes n user calls (Get, each with its own idempotency-key, which the apps pass on)
// to frontend's Service from the node's namespace, each expected to fail UNAVAILABLE.
func grpcUsers(t *testing.T, frontend string, n int, keyPrefix string) {
	t.Helper()
	dial := dialIn("/run/netns/" + netnsName)
	cc, err := grpc.NewClient("passthrough:///"+frontend,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", fmt.Sprintf("%s%d", keyPrefix, i))
		err := labapp.InvokeGRPC(ctx, cc, labapp.GRPCGet)
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("user call %d: %v, want UNAVAILABLE (payment is failing)", i, err)
		}
	}
}

// waitChain waits until the chain's four Deployments are Available and their Services answer
// (the stats port through the pod IP, the gRPC port through a connection to the Service).
func (h *harness) waitChain(t *testing.T, ns string) {
	t.Helper()
	h.waitAvailable(t, ns, ns+": the chain's four Deployments Available", "billing=1 checkout=1 frontend=1 payment=1")
	dial := dialIn("/run/netns/" + netnsName)
	for _, app := range []string{"frontend", "checkout", "billing", "payment"} {
		addr := strings.TrimPrefix(h.serviceURL(t, ns, app), "http://")
		eventually(t, 2*time.Minute, addr+" ("+app+") accepts connections through its Service", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := dial(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		})
	}
}

// testGRPCStorm: the storm chain in gRPC on real pods, payment failing: 27 calls at payment per
// failed user call with the apps' own retries 3 x 3 x 3 and no injection; with the chain
// injected under a cap of 4, at most 4, payment's count equal to billing's sidecar's, and
// observe --from-cluster counting the same per user call as the sidecars' metrics.
func testGRPCStorm(t *testing.T, h *harness) {
	const users = 4
	plain := "storm-grpc-plain"
	h.mustK(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+plain+"}\n"+grpcChain(plain, "3", "3"), "apply", "-f", "-")
	h.waitChain(t, plain)
	payStats := "http://" + h.podIP(t, plain, "payment") + ":8081"
	before := h.labStat(t, payStats, "received")
	grpcUsers(t, strings.TrimPrefix(h.serviceURL(t, plain, "frontend"), "http://"), users, "plain-")
	got := h.labStat(t, payStats, "received") - before
	t.Logf("gRPC storm without injection: %d calls at payment for %d failed user calls (%.1f each)", got, users, float64(got)/users)
	if got != 27*users {
		t.Fatalf("calls at payment: %d for %d failed user calls, want %d (3 x 3 x 3 each)", got, users, 27*users)
	}

	ns := "storm-grpc-policy"
	h.mustK(t, strings.ReplaceAll(stormPolicy, "NS", ns)+grpcChain(ns, "3", "1"), "apply", "-f", "-")
	h.waitChain(t, ns)
	for _, app := range []string{"frontend", "checkout", "billing", "payment"} {
		out := h.mustK(t, "", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name="+app, "-o", "jsonpath={.items[*].spec.initContainers[*].name}")
		if strings.TrimSpace(out) != "retrycap-proxy" {
			t.Fatalf("%s's pod is not injected: init containers %q", app, out)
		}
	}
	payStats = "http://" + h.podIP(t, ns, "payment") + ":8081"
	const metric = "retrycap_proxy_h2_attempts_total"
	hops := []struct{ caller, callee, ip string }{{"frontend", "checkout", ""}, {"checkout", "billing", ""}, {"billing", "payment", ""}}
	hopBefore := make([]int, len(hops))
	for i := range hops {
		hops[i].ip = h.podIP(t, ns, hops[i].caller)
		hopBefore[i] = h.proxyMetric(t, hops[i].ip, metric, `upstream="`+hops[i].callee+`"`)
	}
	before = h.labStat(t, payStats, "received")
	grpcUsers(t, strings.TrimPrefix(h.serviceURL(t, ns, "frontend"), "http://"), users, "node-grpc-")
	got = h.labStat(t, payStats, "received") - before
	metrics := map[string]int{}
	for i, hp := range hops {
		metrics[hp.callee] = h.proxyMetric(t, hp.ip, metric, `upstream="`+hp.callee+`"`) - hopBefore[i]
	}
	t.Logf("gRPC storm with the policy (cap 4): %d calls at payment for %d failed user calls (%.2f each); the sidecars' attempts per hop: %v",
		got, users, float64(got)/users, metrics)
	if got < users || got > 4*users {
		t.Fatalf("calls at payment: %d for %d failed user calls, want between %d and %d (cap 4)", got, users, users, 4*users)
	}
	if metrics["payment"] != got {
		t.Fatalf("billing's sidecar counted %d attempts at payment, payment received %d", metrics["payment"], got)
	}
	h.observeMatches(t, ns, users, "node-grpc-", metrics)
}
