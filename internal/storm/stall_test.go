package storm

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// TestExactCountsThroughAStall: incident18's naive gRPC chain keeps its exact count through a
// stall such as a loaded CI machine gives any process: the order proxy is stopped (SIGSTOP) for
// 2.5 s once the first order attempt reached payment, then resumed. The user request still
// makes 18 calls at payment and 16 retries over its 2 client attempts. With the lab's per-try
// timeouts the gateway proxy's 2 s fires during the stall and cuts that client attempt to its
// calls so far (11 calls at payment on both engines): exactPerTryTimeouts is why it holds.
func TestExactCountsThroughAStall(t *testing.T) {
	const stallFor = 2500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := startChainProto(proxyBin, ArmNaive, ProtocolGRPC, Scenarios["incident18"], 0,
		PaymentConfig{Workers: 4, Work: time.Millisecond, Queue: 16}, t.TempDir(), exactProxyArgs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	c.payment.Kill()
	type result struct {
		ok       bool
		attempts int
	}
	done := make(chan result, 1)
	go func() {
		ok, n := c.userRequest(ctx, getWithKey(0))
		done <- result{ok, n}
	}()
	end := time.Now().Add(10 * time.Second)
	for {
		pay, _, _, err := c.counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pay >= 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no call at payment within 10s")
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	order := c.proxies[2].Cmd.Process
	if err := order.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A stopped proxy would not drain on close.
	defer func() { _ = order.Signal(syscall.SIGCONT) }()
	time.Sleep(stallFor) // the stall itself, not synchronisation
	if err := order.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := <-done
	pay, ret, _, err := c.counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.ok || r.attempts != 2 || pay != 18 || ret != 16 {
		t.Fatalf("through a %s stall of the order proxy: ok %v, %d client attempts, %v calls at payment, %v retries; want failed after 2, 18, 16",
			stallFor, r.ok, r.attempts, pay, ret)
	}
}
