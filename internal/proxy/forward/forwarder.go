package forward

import (
	"bytes"
	"cmp"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// Header names the proxy reads or writes besides the chain ones in policy.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerBaggage        = "Baggage"
	headerRetryAfter     = "Retry-After"
)

// The headers the data path sets on every attempt, as canonical byte
// slices: SetCanonical skips the copy-and-normalise of the key that
// SetBytesV does each time.
var (
	keyBudget   = []byte(policy.HeaderBudget)
	keyBaggage  = []byte(headerBaggage)
	keyDeadline = []byte(policy.HeaderDeadline)
)

// Upstream is one --upstreams entry, or the catch-all for unknown hosts.
type Upstream struct {
	Name     string
	Attempts int
	Known    bool
	// Index is the entry's position in Forwarder.Upstreams (-1 for the
	// catch-all): engines keep per-upstream state of their own by it.
	Index    int
	Budget   *policy.RetryBudget
	Breaker  *policy.Breaker
	M        *UpMetrics
	Resolved string // the --resolve address of its name, if any
	// Dedup: declared to deduplicate by Idempotency-Key (UpstreamConfig.Dedup).
	Dedup bool
	// PerTry bounds each attempt to it (min with the caller's time left):
	// the upstream's own timeout from --upstreams ("payment=3/2s"), else
	// --per-try-timeout.
	PerTry time.Duration
	// node is Name's node in the proxy's namespace (annotations.UpstreamNode), computed once.
	node string
}

// Forwarder is the forwarding core of one proxy: the configuration, the
// upstream table, the policy and the metrics both engines share.
type Forwarder struct {
	Cfg *Config
	pol policy.Policy
	// Upstreams is the table, in --upstreams order; Unknown is the
	// catch-all of hosts none of them names.
	Upstreams []*Upstream
	Unknown   *Upstream
	ledger    *policy.KeyLedger
	methods   [][]byte
	M         *Metrics
	Logger    *log.Logger
	accessLog *accesslog.Writer // nil: --access-log=off (EnableAccessLog)

	selfPort []byte       // the data listener's port, for loop detection
	selfAddr *net.TCPAddr // the data listener's address
	scratch  sync.Pool
	// Accept is the data listener's accept backoff on descriptor
	// exhaustion.
	Accept AcceptPause
	// Reserve is the admin port's spare descriptor.
	Reserve Reserve
	// Bodies bounds the request body bytes both HTTP/1.1 engines hold.
	Bodies *BodyBudget
}

// Scratch is an exchange's reusable buffers.
type Scratch struct {
	bag  []byte // copy of the incoming baggage value (all baggage headers, joined)
	out  []byte // rewritten baggage value
	out2 []byte // rewritten baggage value with the deadline member too
	num  []byte
	conn []byte // copy of the Connection header, whose tokens name hop-by-hop headers
	// Deleting fields in place (fields.go): the head as fasthttp writes
	// it, its header lines, the trailer names.
	head     []byte
	fields   []field
	trailers []byte
	used     []bool
	order    []int
	// interim is the interim answer being passed on (Exchange.Interim).
	interim []byte
}

// New builds the core from a validated Config. logger may be nil.
func New(cfg *Config, logger *log.Logger) *Forwarder {
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	cfg.connDefaults()
	f := &Forwarder{
		Cfg: cfg,
		pol: policy.Policy{RetryOn: cfg.RetryOn, BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, Jitter: cfg.BackoffJitter},
		M:   NewMetrics(), Logger: logger,
		ledger: policy.NewKeyLedger(cfg.KeyTTL, 100000),
	}
	f.scratch.New = func() any { return &Scratch{} }
	f.Bodies = NewBodyBudget(cfg.MaxBufferedBodyBytes)
	f.M.registerBodyBudget(f.Bodies)
	f.Accept.f = f
	for _, m := range cfg.RetryMethods {
		f.methods = append(f.methods, []byte(m))
	}
	for i, u := range cfg.Upstreams {
		up := &Upstream{
			Name: u.Name, Attempts: u.Attempts, Known: true, Index: i, Dedup: u.Dedup, PerTry: cmp.Or(u.PerTryTimeout, cfg.PerTryTimeout),
			Budget:  policy.NewRetryBudget(cfg.BudgetPercent, cfg.BudgetMinPerSecond, cfg.BudgetWindow),
			Breaker: policy.NewBreaker(cfg.BreakerFailures, cfg.BreakerWindow, cfg.BreakerOpenFor),
		}
		up.Resolved = cfg.Resolve[u.Name]
		up.node = annotations.UpstreamNode(u.Name, cfg.Namespace)
		up.M = f.M.forUpstream(u.Name, up.Budget, up.Breaker)
		f.Upstreams = append(f.Upstreams, up)
	}
	f.Unknown = &Upstream{Name: "unknown", Attempts: 1, Index: -1, PerTry: cfg.PerTryTimeout}
	f.Unknown.M = f.M.forUpstream("unknown", nil, nil)
	return f
}

// connDefaults sets the connection timeouts a Config built by hand (a
// test's) leaves zero to the flags' defaults.
func (c *Config) connDefaults() {
	d := sidecar.Defaults()
	for _, t := range []struct{ v, def *time.Duration }{
		{&c.HTTPRequestTimeout, &d.HTTPRequestTimeout}, {&c.KeepAliveTimeout, &d.KeepAliveTimeout},
		{&c.ClientTimeout, &d.ClientTimeout}, {&c.UpstreamIdleTimeout, &d.UpstreamIdleTimeout},
	} {
		if *t.v <= 0 {
			*t.v = *t.def
		}
	}
	if c.MaxBufferedBodyBytes <= 0 {
		c.MaxBufferedBodyBytes = sidecar.DefaultMaxBufferedBodyBytes
	}
}

// Policy is the retry policy (--retry-on and the backoff) the exchanges
// decide by; the h2c path (package h2) decides by the same.
func (f *Forwarder) Policy() policy.Policy { return f.pol }

// Ledger is the entry proxy's Idempotency-Key ledger: the h2c path
// (package h2) charges the same one, so a client switching between
// HTTP/1.1 and HTTP/2 with one key has one chain budget, not two.
func (f *Forwarder) Ledger() *policy.KeyLedger { return f.ledger }

// GetScratch and PutScratch pool the buffers of exchanges that are not
// pooled with their own (the goroutine engine's).
func (f *Forwarder) GetScratch() *Scratch   { return f.scratch.Get().(*Scratch) } //nolint:forcetypeassert // only Scratch is pooled
func (f *Forwarder) PutScratch(sc *Scratch) { f.scratch.Put(sc) }

// Listening records the data listener's address, for IsSelf.
func (f *Forwarder) Listening(addr net.Addr) {
	if a, ok := addr.(*net.TCPAddr); ok {
		f.selfPort = []byte(strconv.Itoa(a.Port))
		f.selfAddr = a
	}
}

// ResolveAddr maps host:port through --resolve (by host name).
func (f *Forwarder) ResolveAddr(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if r, ok := f.Cfg.Resolve[strings.ToLower(host)]; ok {
		return r
	}
	return addr
}

// TargetOf is the address a request for up at hostPort goes to: the
// upstream's --resolve, else hostPort (port 80 by default) through --resolve
// by host name.
func (f *Forwarder) TargetOf(up *Upstream, hostPort []byte) string {
	if up != nil && up.Resolved != "" {
		return up.Resolved
	}
	addr := string(hostPort)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		// An IPv6 literal comes in its brackets, which JoinHostPort adds.
		addr = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), "80")
	}
	return f.ResolveAddr(addr)
}

// Match finds the upstream a request host names; nil if none.
//
// With a namespace the host's node is computed once and compared with each
// upstream's precomputed node; without one, an upstream listed exactly as
// the host names it wins ("order.other=1" for host order.other, though
// "order=3" is listed first), and only then the lenient rule of
// policy.MatchHostIn is applied per upstream.
func (f *Forwarder) Match(host []byte) *Upstream {
	ns := f.Cfg.Namespace
	hn := policy.HostNode(host, ns)
	for _, u := range f.Upstreams {
		if policy.NodeIs(hn, u.node) {
			return u
		}
	}
	if ns != "" {
		return nil
	}
	for _, u := range f.Upstreams {
		if policy.MatchHost(host, u.Name) {
			return u
		}
	}
	return nil
}

// IsSelf reports whether host:port names the data listener: its port on a
// loopback, unspecified or "localhost" host, or on the listener's own host.
// A host without a port means 80.
func (f *Forwarder) IsSelf(hostPort []byte) bool {
	if len(f.selfPort) == 0 {
		return false
	}
	host := SplitHostPort(hostPort)
	port := []byte("80")
	if len(host) < len(hostPort) {
		if i := bytes.LastIndexByte(hostPort, ':'); i >= 0 {
			port = hostPort[i+1:]
		}
	}
	if !bytes.Equal(port, f.selfPort) {
		return false
	}
	if bytes.EqualFold(host, []byte("localhost")) {
		return true
	}
	ip := net.ParseIP(string(host))
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	return f.selfAddr.IP.Equal(ip)
}

// SplitHostPort is the host of host:port ([v6] unbracketed); all of hp
// when it has no port.
func SplitHostPort(hp []byte) (host []byte) {
	if len(hp) > 0 && hp[0] == '[' {
		if i := bytes.IndexByte(hp, ']'); i > 0 {
			return hp[1:i]
		}
	}
	if i := bytes.LastIndexByte(hp, ':'); i >= 0 {
		return hp[:i]
	}
	return hp
}

func (f *Forwarder) methodRetryable(m []byte) bool {
	for _, x := range f.methods {
		if bytes.Equal(x, m) {
			return true
		}
	}
	return false
}

// replayable is the one rule of whether a request may reach an upstream
// more than once: an idempotent method (--retry-methods), or a key that
// makes it retryable toward up (policy.KeyRetryable: the client's own, or
// any for an upstream that deduplicates), and a body within
// --max-replay-bytes. up may be nil (a host no --upstreams entry names).
func (f *Forwarder) replayable(up *Upstream, method, key []byte, bodyLen int) bool {
	return (f.methodRetryable(method) || policy.KeyRetryable(key, up != nil && up.Dedup)) && bodyLen <= f.Cfg.MaxReplayBytes
}

// Replayable reports whether req (as forwarded: its Idempotency-Key is the
// one it went upstream with) may reach its upstream more than once
// (replayable): what an engine asks, on the rare path of a pooled
// connection that failed, when it does not hold the request's Exchange.
func (f *Forwarder) Replayable(req *fasthttp.Request) bool {
	return f.replayable(f.Match(SplitHostPort(req.URI().Host())), req.Header.Method(), req.Header.Peek(headerIdempotencyKey), len(req.Body()))
}

// newKey is the generated Idempotency-Key (policy.NewKey, shared with the
// h2c path).
func newKey() []byte { return policy.NewKey() }
