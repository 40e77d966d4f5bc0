package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/observe"
)

// --access-log=PATH on both engines: one line per attempt with what observe reads, exactly.
func TestAccessLogPerAttempt(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			be := newBackend(t, failFirst(2, 503))
			path := filepath.Join(t.TempDir(), "access.log")
			p := startProxyOn(t, engine, "--service", "order", "--upstreams", "payment=3", "--chain-cap", "4",
				"--resolve", "payment="+be.addr(), "--access-log", path)
			resp := do(t, clientFor(p), "GET", "http://payment.shop:8080/charge?card=4242", map[string]string{
				"Traceparent":     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"Idempotency-Key": "k-1", "X-Request-Id": "r-1", "Baggage": "storm-op=5,x=y",
			})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if err := p.accessLog.w.Close(); err != nil { // flush
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d lines:\n%s", len(lines), data)
			}
			for i, l := range lines {
				a, ok, err := observe.ParseLine([]byte(l), observe.Source{})
				if err != nil || !ok {
					t.Fatalf("line %q: %v %v", l, ok, err)
				}
				wantStatus, wantOut, wantExh := 503, 1, ""
				if i == 0 {
					wantOut = 2
				}
				if i == 2 {
					wantStatus = 200
				}
				if a.Caller != "order" || a.Target != "payment" || a.Method != "GET" || a.Authority != "payment.shop:8080" ||
					a.Path != "/charge" || a.Number != i+1 || a.BudgetIn != 4 || a.BudgetOut != wantOut || a.Status != wantStatus ||
					a.GRPCStatus != -1 || a.Exhausted != wantExh || a.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" ||
					a.IdemKey != "k-1" || a.RequestID != "r-1" || a.StormOp != "5" || a.Duration <= 0 {
					t.Errorf("attempt %d: %+v", i+1, a)
				}
			}
			if n, err := testutil.GatherAndCount(p.m.Reg, "retrycap_proxy_access_log_dropped_total"); err != nil || n != 1 {
				t.Fatalf("drop counter: %d series, %v", n, err)
			}
			if p.accessLog.w.Dropped() != 0 {
				t.Fatalf("dropped %d", p.accessLog.w.Dropped())
			}
		})
	}
}

// A failed call's last attempt names why it was not retried.
func TestAccessLogExhausted(t *testing.T) {
	be := newBackend(t, status(503))
	path := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, "--service", "order", "--upstreams", "payment=2", "--resolve", "payment="+be.addr(), "--access-log", path)
	do(t, clientFor(p), "GET", "http://payment/x", nil)
	if err := p.accessLog.w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"attempt":2,"status":503,`) ||
		!strings.Contains(lines[1], `"exhausted":"attempts"`) || strings.Contains(lines[0], "exhausted") {
		t.Fatalf("lines:\n%s", data)
	}
}
