package h2

import (
	"testing"

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
