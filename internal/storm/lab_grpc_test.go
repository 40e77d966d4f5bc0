package storm

import (
	"fmt"
	"os"
	"testing"

	"github.com/retrycap/retrycap/internal/observe"
)

// The exact counts of the lab's chains over gRPC, as TestExactCountsPerUserRequest does over
// HTTP/1.1: the same proxies and flags, gRPC apps in child processes calling through their
// own proxy (HTTPS_PROXY), payment a gRPC service; payment down for n sequential user
// requests, then back for n more. A gRPC call is retried by its status whatever its method,
// so a Buy (the POST) counts as a GET does; every Buy carries a key (grpcSpec).
func TestExactCountsPerUserRequestGRPC(t *testing.T) {
	runExactCounts(t, ProtocolGRPC, "calls", []exactCase{
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
	}, checkGRPCStatusLogged)
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
