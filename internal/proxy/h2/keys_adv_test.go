package h2

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A gRPC call carrying two idempotency-key values at an entry proxy (chain
// cap 4, 3 attempts, an upstream answering UNAVAILABLE) is charged under
// both: a call with either key alone afterwards is refused without an
// attempt. Before, only the first was charged, and the second alone made 3
// more attempts: 6 at an upstream that reads the last value, under cap 4.
func TestLedgerChargesEveryKey(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4, entrypoint: true})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "idempotency-key", "k2", "idempotency-key", "k3")
	if _, err := callUnary(ctx, cc, "x"); status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v", err)
	}
	if got := b.attempts.Load(); got != 3 {
		t.Fatalf("server saw %d attempts of the two-key call, want 3", got)
	}
	for _, k := range []string{"k3", "k2"} {
		_, err := callUnary(metadata.AppendToOutgoingContext(ctxT(t), "idempotency-key", k), cc, "x")
		if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "retrycap-proxy: upstream echo: chain budget of this Idempotency-Key is spent" {
			t.Errorf("%s alone: %v, want refused: its chain budget is spent", k, err)
		}
	}
	if got := b.attempts.Load(); got != 3 {
		t.Fatalf("server saw %d attempts, want 3 (the calls with one key refused)", got)
	}
	if got := h.ledger.Len(); got != 2 {
		t.Fatalf("ledger holds %d keys, want 2", got)
	}
}

// The retrycap-budget and retrycap-deadline classes a gRPC caller can send
// (metadata and baggage), through the relay (chain cap 4, 3 attempts, an
// upstream answering UNAVAILABLE): a malformed value counts as absent, a
// caller lowers and never raises, repeated values give the smallest; the
// budgets each attempt carried, exactly, and no attempt when no time is left.
func TestGRPCBudgetAndDeadlineClasses(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	reset := func() {
		b.mu.Lock()
		b.seen = nil
		b.mu.Unlock()
	}
	for _, tc := range []struct {
		name string
		md   []string
		want []string // retrycap-budget per attempt
	}{
		{"absent: the cap", nil, []string{"2", "1", "1"}},
		{"raised", []string{"retrycap-budget", "1000"}, []string{"2", "1", "1"}},
		{"1", []string{"retrycap-budget", "1"}, []string{"1"}},
		{"2", []string{"retrycap-budget", "2"}, []string{"1", "1"}},
		{"0: absent", []string{"retrycap-budget", "0"}, []string{"2", "1", "1"}},
		{"+1: absent", []string{"retrycap-budget", "+1"}, []string{"2", "1", "1"}},
		{"1.0: absent", []string{"retrycap-budget", "1.0"}, []string{"2", "1", "1"}},
		{"2^64+1: absent, no wrap", []string{"retrycap-budget", "18446744073709551617"}, []string{"2", "1", "1"}},
		{"two values: the smallest", []string{"retrycap-budget", "1000", "retrycap-budget", "1"}, []string{"1"}},
		{"a list", []string{"retrycap-budget", "1000, 2"}, []string{"1", "1"}},
		{"baggage", []string{"baggage", "a=b,retrycap-budget=1"}, []string{"1"}},
		{"baggage duplicates", []string{"baggage", "retrycap-budget=3,retrycap-budget=1"}, []string{"1"}},
		{"malformed deadline: absent", []string{"retrycap-deadline", "+5"}, []string{"2", "1", "1"}},
		{"deadline 2^64: absent", []string{"retrycap-deadline", "18446744073709551616"}, []string{"2", "1", "1"}},
	} {
		reset()
		ctx := ctxT(t)
		if len(tc.md) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, tc.md...)
		}
		if _, err := callUnary(ctx, cc, "x"); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want UNAVAILABLE", tc.name, err)
		}
		if got := b.values("retrycap-budget"); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: budgets per attempt %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, v := range []string{"0", "3000, 0"} {
		reset()
		var tr metadata.MD
		_, err := callUnary(metadata.AppendToOutgoingContext(ctxT(t), "retrycap-deadline", v), cc, "x", grpc.Trailer(&tr))
		if status.Code(err) != codes.DeadlineExceeded || strings.Join(tr.Get("retrycap-exhausted"), ",") != "deadline" || len(b.values("retrycap-budget")) != 0 {
			t.Errorf("deadline %q: %v, exhausted %q, %d attempts; want DEADLINE_EXCEEDED, deadline, none", v, err, tr.Get("retrycap-exhausted"), len(b.values("retrycap-budget")))
		}
	}
}
