package storm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/labapp"
)

// The payment service of the lab. labapp's leaf answers at once, so its
// Capacity never binds; the storm needs a service whose capacity is real:
// each request occupies one of Workers for Work, at most Queue requests
// wait for a worker (FIFO), and beyond that payment answers 503 at once.
// Like most servers it does not notice that a caller gave up: a request
// that waited in the queue past its caller's timeout is still served, and
// that wasted work is what keeps an overloaded service down (the metastable
// failure of Bronson et al.) once retries multiply the load.
//
// Killing payment closes its listener and every connection and drops its
// queue (callers see refused connections); restoring it listens again on
// the same address with an empty queue. Hanging it (the other outage,
// Options.Outage) keeps it listening but answering nothing: callers see
// only their own timeouts, which is how timeouts add up along a chain.

// opBaggageKey is the baggage member carrying the user operation id: the
// edge client sets it, the apps propagate baggage, the proxies keep other
// baggage members, so payment knows which user request a POST belongs to.
const opBaggageKey = "storm-op"

// SideEffects is payment's ledger of POST side effects ("charges"). A POST
// with an Idempotency-Key is charged the first time that key is served and
// replayed (no charge) afterwards, as a server honouring idempotency keys
// does; a POST without one is charged every time it is served. A duplicate
// is a charge for a user operation that was already charged: the money
// taken twice. Only a POST without a key that reaches payment twice (a
// naive retry of a non-idempotent request) can cause one.
type SideEffects struct {
	mu                            sync.Mutex
	keys                          map[string]struct{}
	ops                           map[string]int
	charges, replayed, duplicates int64
}

// NewSideEffects returns an empty ledger.
func NewSideEffects() *SideEffects {
	return &SideEffects{keys: map[string]struct{}{}, ops: map[string]int{}}
}

// Outcome of one served POST.
type Outcome int

// Outcomes of Record.
const (
	Charged   Outcome = iota // first charge for the operation
	Replayed                 // key already charged: stored result, no charge
	Duplicate                // charged again for an operation already charged
)

// Record books one served POST of operation op (empty: unknown, never a
// duplicate) with Idempotency-Key key (may be empty).
func (s *SideEffects) Record(op, key string) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if _, seen := s.keys[key]; seen {
			s.replayed++
			return Replayed
		}
		s.keys[key] = struct{}{}
	}
	s.charges++
	if op == "" {
		return Charged
	}
	s.ops[op]++
	if s.ops[op] > 1 {
		s.duplicates++
		return Duplicate
	}
	return Charged
}

// Counts returns charges, replayed POSTs and duplicates so far.
func (s *SideEffects) Counts() (charges, replayed, duplicates int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.charges, s.replayed, s.duplicates
}

// PaymentConfig configures the payment service.
type PaymentConfig struct {
	Workers int           // requests served at once
	Work    time.Duration // time one request occupies a worker
	Queue   int           // requests that may wait for a worker; beyond, 503 at once
	// GRPC serves the lab's gRPC service (labapp.RegisterGRPC) instead of
	// HTTP: Buy is the charge (a POST's side effect), a full queue answers
	// UNAVAILABLE; otherwise the same capacity, kill and restore.
	GRPC bool
	// Arrived, if set, is called with the user operation id (storm-op, "" if none) of each
	// request as it reaches payment, before it is queued or refused.
	Arrived func(op string)
}

// Payment is the running payment service.
type Payment struct {
	cfg     PaymentConfig
	addr    string
	effects *SideEffects

	mu   sync.Mutex
	life *paymentLife // nil while killed

	received, served, rejected, released atomic.Int64

	// hang, while set, is closed by Restore: payment is hung (Hang).
	hang atomic.Pointer[chan struct{}]
}

// paymentLife is one incarnation: its server, queue and workers.
type paymentLife struct {
	srv     *http.Server
	gsrv    *grpc.Server // with PaymentConfig.GRPC, in place of srv
	ctx     context.Context
	cancel  context.CancelFunc
	workers chan struct{}
	waiting atomic.Int64
}

// StartPayment starts payment on 127.0.0.1 (a free port).
func StartPayment(cfg PaymentConfig) (*Payment, error) {
	if cfg.Workers < 1 || cfg.Work <= 0 || cfg.Queue < 0 {
		return nil, fmt.Errorf("payment: workers %d, work %s, queue %d: want workers >= 1, work > 0, queue >= 0", cfg.Workers, cfg.Work, cfg.Queue)
	}
	p := &Payment{cfg: cfg, addr: "127.0.0.1:0", effects: NewSideEffects()}
	if err := p.Restore(); err != nil {
		return nil, err
	}
	return p, nil
}

// Addr is payment's address (stable across kill and restore).
func (p *Payment) Addr() string { return p.addr }

// Effects is payment's side-effect ledger.
func (p *Payment) Effects() *SideEffects { return p.effects }

// Received, Served and Rejected count requests that reached payment (the
// admin paths excluded): all, answered 200, answered 503 for a full queue.
func (p *Payment) Received() int64 { return p.received.Load() }

// Served counts requests answered 200.
func (p *Payment) Served() int64 { return p.served.Load() }

// Rejected counts requests answered 503 because the queue was full, or because
// they were held by a hang (Hang) until Restore.
func (p *Payment) Rejected() int64 { return p.rejected.Load() }

// Released counts requests a hung payment let go because their caller hung up (serveOne).
func (p *Payment) Released() int64 { return p.released.Load() }

// Kill stops payment as a crash would: no listener, connections closed,
// queued and in-service requests dropped.
func (p *Payment) Kill() {
	p.mu.Lock()
	life := p.life
	p.life = nil
	p.mu.Unlock()
	if life == nil {
		return
	}
	life.cancel()
	if life.gsrv != nil {
		life.gsrv.Stop()
		return
	}
	_ = life.srv.Close()
}

// Hang makes payment stop answering without going away, the second write-up's "payment
// service which does not answer": it still accepts connections and reads requests, but answers
// none until Restore, which answers those still waiting 503 (their callers' timeouts have
// long fired). A caller sees nothing but its own timeout.
func (p *Payment) Hang() {
	ch := make(chan struct{})
	p.hang.CompareAndSwap(nil, &ch)
}

// Restore starts payment again on the same address, with an empty queue;
// a hung payment (Hang) answers again.
func (p *Payment) Restore() error {
	if ch := p.hang.Swap(nil); ch != nil {
		close(*ch)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life != nil {
		return nil
	}
	var ln net.Listener
	var err error
	// The port was ours a moment ago; binding it again can race the
	// kernel's cleanup of the old socket for a few milliseconds.
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("payment: listen on %s: %w", p.addr, err)
	}
	p.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	life := &paymentLife{ctx: ctx, cancel: cancel, workers: make(chan struct{}, p.cfg.Workers)}
	p.life = life
	if p.cfg.GRPC {
		life.gsrv = grpc.NewServer()
		labapp.RegisterGRPC(life.gsrv, p.grpcHandler(life))
		go func() {
			if err := life.gsrv.Serve(ln); err != nil {
				cancel()
			}
		}()
		return nil
	}
	life.srv = &http.Server{Handler: p.handler(life), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := life.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cancel()
		}
	}()
	return nil
}

// Close stops payment for good.
func (p *Payment) Close() { p.Kill() }

// serveOne is one request's life at payment, either protocol: counted,
// refused when the queue is full, else queued for a worker and served
// (the charge booked for a POST, charge true), unless payment is killed
// meanwhile. It does not watch its caller: a caller that gave up is served
// all the same. The one exception is a hung payment: a request it holds is
// released (neither served nor rejected, already counted as received) when
// its caller hangs up (ctx, the request's context, ends). Nothing could reach
// that caller any more, so no caller sees a difference; but the lab's payment
// shares one process, and one open-file limit, with the apps, and a 20 s hang
// under the naive storm holds ~1,350 new connections a second: kept to the
// restore they would exhaust the limit in ~15 s, payment would stop accepting
// (a hang turned into refused connections) and the apps' calls would fail,
// which is the lab's limit, not the system under test.
func (p *Payment) serveOne(ctx context.Context, life *paymentLife, charge bool, op, key string) (served, rejected bool) {
	if p.cfg.Arrived != nil {
		p.cfg.Arrived(op)
	}
	p.received.Add(1)
	if ch := p.hang.Load(); ch != nil {
		select {
		case <-*ch: // restored: too late to serve
		case <-life.ctx.Done():
			return false, false // killed while hung
		case <-ctx.Done():
			p.released.Add(1)
			return false, false // its caller hung up while payment held it
		}
		p.rejected.Add(1)
		return false, true
	}
	if life.waiting.Add(1) > int64(p.cfg.Workers+p.cfg.Queue) {
		life.waiting.Add(-1)
		p.rejected.Add(1)
		return false, true
	}
	defer life.waiting.Add(-1)
	select {
	case life.workers <- struct{}{}:
	case <-life.ctx.Done():
		return false, false // killed while queued
	}
	t := time.NewTimer(p.cfg.Work)
	select {
	case <-t.C:
	case <-life.ctx.Done():
		t.Stop()
		<-life.workers
		return false, false // killed while serving
	}
	<-life.workers
	if charge {
		p.effects.Record(op, key)
	}
	p.served.Add(1)
	return true, false
}

func (p *Payment) handler(life *paymentLife) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		served, rejected := p.serveOne(r.Context(), life, r.Method == http.MethodPost, opOf(r.Header.Values("Baggage")), r.Header.Get("Idempotency-Key"))
		switch {
		case rejected:
			http.Error(w, "payment: over capacity", http.StatusServiceUnavailable)
		case served:
			_, _ = io.WriteString(w, "payment: ok\n")
		}
	}
}

// grpcHandler is payment over gRPC: Buy is the charge; a full queue is
// UNAVAILABLE; a call dropped by a kill ends with the connection.
func (p *Payment) grpcHandler(life *paymentLife) labapp.GRPCHandler {
	return func(ctx context.Context, method string) error {
		md, _ := metadata.FromIncomingContext(ctx)
		key := ""
		if ks := md.Get("idempotency-key"); len(ks) > 0 {
			key = ks[0]
		}
		served, rejected := p.serveOne(ctx, life, method == labapp.GRPCBuy, opOf(md.Get("baggage")), key)
		switch {
		case rejected:
			return status.Error(codes.Unavailable, "payment: over capacity")
		case !served:
			return status.Error(codes.Unavailable, "payment: killed")
		}
		return nil
	}
}

// opOf reads the user operation id from a request's baggage values.
func opOf(bags []string) string {
	for _, bag := range bags {
		for _, m := range strings.Split(bag, ",") {
			if i := strings.IndexByte(m, ';'); i >= 0 {
				m = m[:i]
			}
			k, v, ok := strings.Cut(m, "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), opBaggageKey) {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}
