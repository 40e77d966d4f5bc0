package h2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Upstream is one --upstreams entry as the h2c path sees it. Budget and
// Breaker are the HTTP/1.1 path's own objects, so both protocols share one
// retry budget and one breaker per upstream.
type Upstream struct {
	Name     string
	Attempts int                 // tries per call (>= 1)
	Addr     string              // address to dial; "" = the call's host:port through Config.Resolve
	Budget   *policy.RetryBudget // nil: no retry budget
	Breaker  *policy.Breaker     // nil: no breaker
	Dedup    bool                // deduplicates by Idempotency-Key: any key makes a POST retryable (policy.KeyRetryable)
	// PerTryTimeout is the upstream's own per-try timeout (the upstreams
	// grammar's "/TIMEOUT"); 0: Config.PerTryTimeout.
	PerTryTimeout time.Duration
}

// Config is what the h2c path needs from the proxy; every field but Lookup
// has a usable zero value.
type Config struct {
	// Lookup finds the upstream a host (without port, any case) names; nil
	// when none does (the call is then forwarded once, without retries).
	Lookup func(host string) *Upstream
	// IsSelf reports whether host:port is the proxy's own listener (a call
	// there is refused: it would loop). nil: never.
	IsSelf func(hostPort string) bool
	// ChainCap is --chain-cap; 0 turns chain budgeting off.
	ChainCap int
	// PerTryTimeout bounds one attempt up to its response headers (and the
	// dial), unless the upstream has its own (Upstream.PerTryTimeout); the
	// caller's time left bounds it further.
	PerTryTimeout time.Duration
	// MaxTimeToAnswer is --max-time-to-answer: the bound on a call's
	// deadline when the caller sent none or a larger one (0: none).
	MaxTimeToAnswer time.Duration
	// Policy is the retry-on set and the backoff.
	Policy policy.Policy
	// RetryMethods are the methods a plain (non-gRPC) HTTP/2 request is
	// retried with without an Idempotency-Key; gRPC calls ignore them.
	RetryMethods []string
	// MaxReplayBytes is the largest request body (gRPC: the messages sent
	// so far) that is kept to be re-sent.
	MaxReplayBytes int
	// Resolve maps a host:port to the address to dial (--resolve); nil: as is.
	Resolve func(hostPort string) string
	// Dial opens an upstream connection; nil: net.Dialer with PerTryTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Registerer takes the metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Now is the clock the budget and breaker read (unix ns); nil: time.Now.
	Now func() int64
	// Logger; nil: discard.
	Logger *log.Logger
	// MaxConcurrentStreams advertised to clients; 0: 1000.
	MaxConcurrentStreams uint32
	// MaxUpstreamConns bounds the connections to one upstream address;
	// 0: 1024 (Envoy's default max_connections per cluster). Past it,
	// attempts wait for a stream slot on the ones open (rpool.acquire).
	MaxUpstreamConns int
	// IdleTimeout closes (GOAWAY) a client connection idle that long; 0: 5m.
	IdleTimeout time.Duration
	// PingInterval: a client connection nothing was read from for that
	// long is sent a PING; 0: 60s (as grpc-go's keepalive finds a dead
	// peer). PingTimeout: unanswered that long, the connection is closed;
	// 0: 15s. Both engines.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// AccessLog takes one line per attempt (--access-log), as the HTTP/1.1
	// path writes them, with grpc_status for gRPC; nil: none. The line of
	// an answer passed on is written when its stream ends, with "cut" and
	// "body_bytes" when it ended short (rstream.close).
	AccessLog *accesslog.Writer
	// ResponsesCut counts the answers passed on whose stream ended short
	// after their headers went to the client, by upstream and who cut it
	// (accesslog.CutUpstream, ...): the HTTP/1.1 path's
	// retrycap_proxy_responses_cut_total (forward.Metrics.ResponsesCut);
	// nil: not counted.
	ResponsesCut *prometheus.CounterVec
	// Entrypoint is --entrypoint: a call carrying an Idempotency-Key
	// (gRPC metadata idempotency-key) is charged in the key ledger, so a
	// client retrying with the same key gets what is left of the chain
	// budget, not a fresh cap, as on the HTTP/1.1 path; a plain HTTP/2
	// POST or PATCH without a key gets a generated one (policy.NewKey),
	// returned on a failed answer. gRPC calls get none: their retries
	// follow grpc-status, not the method and key rules.
	Entrypoint bool
	// Ledger is the key ledger charged at an entrypoint: the HTTP/1.1
	// path's (forward.Forwarder.Ledger), so one key has one chain budget
	// whichever protocol the client retries with. nil with Entrypoint: a
	// ledger of this Handler's own, remembering keys for KeyTTL.
	Ledger *policy.KeyLedger
	// KeyTTL is how long an own ledger remembers a key; 0: 10m.
	KeyTTL time.Duration
	// RequestTimeout is --http-request-timeout on HTTP/2: the client
	// preface and its first SETTINGS must arrive within it of the
	// connection's start, and every frame (a header block with its
	// CONTINUATIONs) within it of its first byte, else the connection is
	// closed (slowloris: HAProxy's timeout http-request); 0: 10s.
	RequestTimeout time.Duration
	// StreamIdleTimeout is --stream-idle-timeout: a stream on which no
	// frame of the call came from its client or its upstream for that
	// long is ended (rstream.idleOut), checked by the connection's
	// keepalive timer every quarter of it; 0: 5m (Envoy's
	// stream_idle_timeout default), negative: never.
	StreamIdleTimeout time.Duration
	// PassInterim is --pass-interim-answers: an upstream's 1xx (but 100)
	// is passed on to a plain HTTP/2 client before the final answer, up
	// to forward.MaxInterimRelayed bytes of them per call, and its
	// attempt is then not retried; false: dropped (rstream passInterim).
	PassInterim bool
	// WriteTimeout bounds one write(2) to a connection (a client that
	// stops reading loses its connection after it, nothing else);
	// 0: 10s.
	WriteTimeout time.Duration
}

// Handler terminates h2c client connections and proxies their streams.
type Handler struct {
	cfg     Config
	m       *metrics
	methods map[string]bool
	unknown *Upstream
	ups     sync.Map // *Upstream -> *[2]*upMetrics (grpc, h2)
	conns   sync.WaitGroup
	closing atomic.Bool
	ledger  *policy.KeyLedger // nil unless Entrypoint
	rmu     sync.Mutex
	// The relay's event loops (cloop_linux.go), made at the first
	// connection; nextLoop deals connections to them in turn.
	loopOnce sync.Once
	loops    []*rloop
	nextLoop atomic.Uint32
	rconns   map[*cconn]struct{} // the relay's client connections
	rpools   sync.Map            // the relay's upstream addresses -> *rpool
	// The relay's connections with writes not flushed yet (batchconn.go).
	dmu        sync.Mutex
	dirty      []*batchConn
	spareDirty []*batchConn
	dtimer     *time.Timer
	dtArmed    bool // dtimer is due (markDirty)
	// finEvery is how often a client that sent a FIN with calls under
	// way is probed (finProbe; waitAnswers): a test that must see a
	// client's close found by something else lengthens it.
	finEvery time.Duration
}

// New builds a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Lookup == nil {
		cfg.Lookup = func(string) *Upstream { return nil }
	}
	if cfg.PerTryTimeout <= 0 {
		cfg.PerTryTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard, "", 0)
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = 1000
	}
	if cfg.MaxUpstreamConns <= 0 {
		cfg.MaxUpstreamConns = 1024
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 60 * time.Second
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 15 * time.Second
	}
	if cfg.StreamIdleTimeout == 0 {
		cfg.StreamIdleTimeout = 5 * time.Minute
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = defaultWriteTimeout
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.PerTryTimeout}
		cfg.Dial = d.DialContext
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("h2 metrics: %w", err)
	}
	m.cut = cfg.ResponsesCut
	h := &Handler{cfg: cfg, m: m, methods: map[string]bool{}, unknown: &Upstream{Name: "unknown", Attempts: 1}, finEvery: finProbe}
	if cfg.Entrypoint {
		h.ledger = cfg.Ledger
		if h.ledger == nil {
			if cfg.KeyTTL <= 0 {
				cfg.KeyTTL = 10 * time.Minute
			}
			h.ledger = policy.NewKeyLedger(cfg.KeyTTL, 100000)
		}
	}
	for _, x := range cfg.RetryMethods {
		h.methods[strings.ToUpper(x)] = true
	}
	h.dtimer = time.AfterFunc(time.Hour, h.safetyNet)
	h.dtimer.Stop()
	return h, nil
}

// ServeConn serves one client connection speaking h2c until it ends; c
// starts with the client preface. target is the CONNECT host:port the
// connection was tunnelled to, which every stream is routed to; "" for
// h2c with prior knowledge on the listener, where each stream is routed by
// its :authority.
func (h *Handler) ServeConn(c net.Conn, target string) {
	if h.closing.Load() {
		_ = c.Close()
		return
	}
	h.conns.Add(1)
	defer h.conns.Done()
	kind := "connect"
	if target == "" {
		kind = "prior-knowledge"
	}
	h.m.conns.WithLabelValues(kind).Inc()
	h.serveRelay(c, target)
}

// Shutdown sends GOAWAY to every client connection, lets their streams end
// until ctx does, and closes idle upstream connections.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.closing.Store(true)
	h.relayShutdown(ctx.Done())
	h.conns.Wait()
	return ctx.Err()
}

// dialError marks a failure to connect (connect-failure, not reset).
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func (h *Handler) metricsFor(up *Upstream, grpc bool) *upMetrics {
	v, ok := h.ups.Load(up)
	if !ok {
		pair := &[2]*upMetrics{h.m.forUpstream(up.Name, "grpc"), h.m.forUpstream(up.Name, "h2")}
		v, _ = h.ups.LoadOrStore(up, pair)
	}
	pair := v.(*[2]*upMetrics)
	if grpc {
		return pair[0]
	}
	return pair[1]
}

func hostOf(hostPort string) string {
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		return h
	}
	return strings.Trim(hostPort, "[]")
}

// classify maps a transport error to a retry-on condition: the rule is
// policy's, shared with HTTP/1.1; which errors are dial failures is the
// relay's (dialError).
func classify(err error, timedOut bool) policy.Condition {
	var de *dialError
	return policy.ClassifyTransport(err, errors.As(err, &de), timedOut)
}

// finish passes on the last attempt's answer (marked Retrycap-Exhausted
// when the reason is one of the four), or the proxy's own when there is none.
// failedStatus reports whether an upstream's HTTP status is a failed
// answer the client may retry, on which a generated key is returned: a
// 5xx, a 429 (it asks for exactly that) or a status --retry-on names, as
// forward.Exchange.finish decides.
func (h *Handler) failedStatus(st int) bool {
	return st >= 500 || st == http.StatusTooManyRequests || h.cfg.Policy.RetryOn.Status(st)
}
