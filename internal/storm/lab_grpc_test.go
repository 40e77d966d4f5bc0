package storm

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/observe"
)

// The exact counts of the lab's chains over gRPC, as TestExactCountsPerUserRequest does over
// HTTP/1.1: the same proxies and flags, gRPC apps in child processes calling through their
// own proxy (HTTPS_PROXY), payment a gRPC service; payment down for n sequential user
// requests, then back for n more. A gRPC call is retried by its status whatever its method,
// so a Buy (the POST) counts as a GET does; every Buy carries a key (grpcSpec).
func TestExactCountsPerUserRequestGRPC(t *testing.T) {
	const n = 3
	cases := []struct {
		scenario, arm string
		spec          func(i int) userSpec
		// per failed user request: calls at payment, retries the proxies sent, edge client
		// attempts; attempts at gateway (the entry proxy's), from the access logs
		payment, retries, clientAttempts, atGateway int
	}{
		// 3 x 3 x 3: 27 at payment, 2 + 3x2 + 9x2 = 26 retries.
		{"storm27", ArmNaive, get, 27, 26, 1, 3},
		// Cap 4: budgets 2, 1, 1 from the entry proxy, 1+1 at the gateway: 4 at payment.
		{"storm27", ArmRetrycap, get, 4, 3, 1, 3},
		{"storm27", ArmRetrycap, buyWithKey, 4, 3, 1, 3},
		// 2 x 1 x 3 x 3 = 18; retries: 2x2 at the gateway, 6x2 at order.
		{"incident18", ArmNaive, getWithKey, 18, 16, 2, 2},
		{"incident18", ArmNaive, buyWithKey, 18, 16, 2, 2},
		// Cap 3: the first client attempt spends the key's whole chain budget (3 at payment);
		// the client's retry with the same key is refused by the entry proxy's ledger.
		{"incident18", ArmRetrycap, getWithKey, 3, 2, 2, 1},
		{"incident18", ArmRetrycap, buyWithKey, 3, 2, 2, 1},
	}
	for _, tc := range cases {
		name := tc.spec(0).method
		if tc.spec(0).key != "" {
			name += "+key"
		}
		t.Run(fmt.Sprintf("%s/%s/%s", tc.scenario, tc.arm, name), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			logDir := t.TempDir()
			c, err := startChainProto(proxyBin, tc.arm, ProtocolGRPC, Scenarios[tc.scenario], PaymentConfig{Workers: 4, Work: time.Millisecond, Queue: 16}, logDir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()

			c.payment.Kill()
			for i := 0; i < n; i++ {
				ok, attempts := c.userRequest(ctx, tc.spec(i))
				if ok || attempts != tc.clientAttempts {
					t.Fatalf("user request %d with payment down: ok %v, attempts %d, want failed after %d", i, ok, attempts, tc.clientAttempts)
				}
			}
			pay, ret, err := c.counters(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pay != float64(n*tc.payment) || ret != float64(n*tc.retries) {
				t.Fatalf("payment down for %d user requests: %v calls at payment, %v retries; want %d, %d",
					n, pay, ret, n*tc.payment, n*tc.retries)
			}
			if got := c.clientRetries.Load(); got != int64(n*(tc.clientAttempts-1)) {
				t.Fatalf("edge client retries %d, want %d", got, n*(tc.clientAttempts-1))
			}
			if got := PerFailed(pay, n); got != float64(tc.payment) {
				t.Fatalf("per failed user request %v, want %d", got, tc.payment)
			}

			if err := c.payment.Restore(); err != nil {
				t.Fatal(err)
			}
			for i := n; i < 2*n; i++ {
				if ok, attempts := c.userRequest(ctx, tc.spec(i)); !ok || attempts != 1 {
					t.Fatalf("user request %d with payment back: ok %v, attempts %d", i, ok, attempts)
				}
			}
			pay2, ret2, err := c.counters(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pay2-pay != n || ret2 != ret || c.payment.Received() != n || c.payment.Served() != n {
				t.Fatalf("payment back: %v more calls at payment, %v more retries, received %d, served %d; want %d, 0, %d, %d",
					pay2-pay, ret2-ret, c.payment.Received(), c.payment.Served(), n, n, n)
			}
			charges, replayed, dups := c.payment.Effects().Counts()
			wantCharges := int64(0)
			if tc.spec(0).method == "POST" {
				wantCharges = n
			}
			if charges != wantCharges || replayed != 0 || dups != 0 {
				t.Fatalf("side effects: %d charged, %d replayed, %d duplicates; want %d, 0, 0", charges, replayed, dups, wantCharges)
			}
			c.close() // flushes the access logs
			checkObserved(t, logDir, tc.arm, n, tc.payment, tc.atGateway)
			checkGRPCStatusLogged(t, logDir, tc.arm)
		})
	}
}

// checkGRPCStatusLogged: every line of the arm's access logs is a gRPC attempt (path
// /retrycap.lab.Chain/...) with its grpc_status: 14 or 0 (every failure is UNAVAILABLE), or
// a connect failure (no status) at payment while it was down.
func checkGRPCStatusLogged(t *testing.T, dir, arm string) {
	t.Helper()
	lines := 0
	for _, p := range AccessLogPaths(dir, arm) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = observe.Parse(f, observe.Source{Name: p}, func(a observe.Attempt) {
			lines++
			ok := a.Path == "/retrycap.lab.Chain/Get" || a.Path == "/retrycap.lab.Chain/Buy"
			if a.Error != "" {
				ok = ok && a.Error == "connect-failure" && a.GRPCStatus == -1 && a.Target == "payment"
			} else {
				ok = ok && a.Status == 200 && (a.GRPCStatus == 0 || a.GRPCStatus == 14)
			}
			if !ok {
				t.Errorf("%s: attempt %+v", p, a)
			}
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if lines == 0 {
		t.Fatal("no access-log lines")
	}
}

func buyWithKey(i int) userSpec {
	return userSpec{method: "POST", op: fmt.Sprint(i), key: fmt.Sprint("key-", i)}
}
