package sidecar

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
)

// NamespaceEnv is the environment variable the proxy reads its --namespace from when the flag is
// not given. The injector sets it in the sidecar container from the downward API
// (metadata.namespace) rather than rendering the flag, so a pod's proxy args are what they were
// before the proxy knew its namespace.
const NamespaceEnv = "POD_NAMESPACE"

// The --access-log values besides a file path.
const (
	AccessLogOff    = "off"
	AccessLogStdout = "stdout"
)

// Where the proxy listens by default; the injector renders these, and points the app containers'
// HTTP_PROXY at DefaultListen.
const (
	// DefaultListen is the data listener: loopback only, so nothing outside the pod uses it.
	DefaultListen = "127.0.0.1:15001"
	// DefaultListenPort is DefaultListen's port (the injector skips a pod that already uses it).
	DefaultListenPort = 15001
	// DefaultAdminPort serves /metrics, /healthz and /readyz, on every address.
	DefaultAdminPort = 15020
	// DefaultLoopSpin is --loop-spin's default: off (docs/decisions.md, "A busy event loop
	// spins before it sleeps": no req/s gain shown beyond the noise, and CPU spent at high rates).
	DefaultLoopSpin = 0
	// DefaultMaxBufferedBodyBytes is --max-buffered-body-bytes' default, 32 MiB: the injected
	// sidecar's memory limit (64Mi) less its idle RSS (~18 MiB) leaves ~46 MiB, and a body held
	// whole costs more than its bytes (the goroutine engine's buffer of a chunked body grows by
	// doubling, its old halves garbage until the next GC). Unbounded, three concurrent 15 MiB
	// uploads OOM-killed the sidecar (docs/decisions.md, "A proxy-wide budget of buffered
	// request bodies").
	DefaultMaxBufferedBodyBytes = 32 << 20
)

// Args is retrycap-proxy's command line. The grammars of Upstreams (the retrycap.dev/upstreams
// annotation's), RetryOn and Resolve are their parsers' (internal/annotations,
// internal/proxy/policy, the proxy's config): Args carries them as written.
type Args struct {
	Listen    string
	Admin     string
	Service   string
	Namespace string // the pod's namespace: which upstream names are in it (see annotations.UpstreamNode); default $POD_NAMESPACE in the proxy
	Upstreams string // NAME[=ATTEMPTS][*CALLS], comma separated
	// DedupUpstreams names the upstreams (each one of Upstreams) that deduplicate requests by
	// Idempotency-Key: toward them any key, a generated one included, makes a POST or PATCH
	// retryable. Comma separated.
	DedupUpstreams string
	// Entrypoint: this proxy is at a chain entry.
	Entrypoint      bool
	ChainCap        int
	DefaultAttempts int
	PerTryTimeout   time.Duration
	// MaxTimeToAnswer bounds the time a call through this proxy may take (the entrypoint's
	// maxTimeToAnswer): it sets Retrycap-Deadline when the caller sent none or a larger one. 0: none.
	MaxTimeToAnswer time.Duration
	BackoffBase     time.Duration
	BackoffMax      time.Duration
	BackoffJitter   bool
	RetryOn         string // comma separated
	// RetryMethods are written as one comma-separated value (CSV, as pflag reads it); nil and
	// empty both render as "--retry-methods=", which parses as empty.
	RetryMethods       []string
	BudgetPercent      int
	BudgetMinPerSecond int
	BudgetWindow       time.Duration
	BreakerFailures    int
	BreakerWindow      time.Duration
	BreakerOpenFor     time.Duration
	MaxReplayBytes     int
	KeyTTL             time.Duration
	Resolve            string // NAME=HOST:PORT, comma separated
	DrainTimeout       time.Duration
	// Connection management (HAProxy's timeout http-request, http-keep-alive, client; and a
	// bound on how long a pooled upstream connection is trusted).
	HTTPRequestTimeout  time.Duration
	KeepAliveTimeout    time.Duration
	ClientTimeout       time.Duration
	UpstreamIdleTimeout time.Duration
	Engine              string // "loop" or "goroutine"
	// LoopSpin is how long a busy event loop polls before it sleeps (0: never).
	LoopSpin time.Duration
	Check    bool
	// AccessLog is where the per-attempt access log goes: "off", "stdout" or a file path.
	AccessLog string

	// MaxBufferedBodyBytes bounds the request body bytes the HTTP/1.1 engines hold at once,
	// proxy-wide.
	MaxBufferedBodyBytes int
	// PassInterimAnswers passes an HTTP/1.1 upstream's interim answers (1xx but 100 and
	// 101: 103 Early Hints) on to HTTP/1.1 clients; off, they are dropped.
	PassInterimAnswers bool
	// StreamIdleTimeout ends an HTTP/2 or gRPC stream through the h2 relay on which nothing
	// was sent or received for this long (Envoy's stream_idle_timeout); 0: never.
	StreamIdleTimeout time.Duration
}

// Defaults are the flag defaults; the retry ones are the RetryPolicy defaults
// (api/v1alpha1/defaults).
func Defaults() Args {
	return Args{
		Listen:             DefaultListen,
		Admin:              ":" + strconv.Itoa(DefaultAdminPort),
		DefaultAttempts:    defaults.Attempts,
		PerTryTimeout:      defaults.PerTryTimeout,
		BackoffBase:        defaults.BackoffBase,
		BackoffMax:         defaults.BackoffMax,
		BackoffJitter:      true,
		RetryOn:            strings.Join(defaults.RetryOn(), ","),
		RetryMethods:       defaults.Methods(),
		BudgetPercent:      defaults.BudgetPercent,
		BudgetMinPerSecond: defaults.BudgetMinPerSecond,
		BudgetWindow:       defaults.BudgetWindow,
		BreakerFailures:    defaults.BreakerFailures,
		BreakerWindow:      defaults.BreakerWindow,
		BreakerOpenFor:     defaults.BreakerOpenFor,
		MaxReplayBytes:     defaults.MaxReplayBytes,
		KeyTTL:             defaults.KeyTTL,
		DrainTimeout:       10 * time.Second,
		// HAProxy answers 408 after its timeout http-request (commonly 10s).
		HTTPRequestTimeout: 10 * time.Second,
		// Longer than the clients' own pools keep a connection (Go's http.Transport: 90s),
		// so that the app, not the proxy, closes an idle one first.
		KeepAliveTimeout: 95 * time.Second,
		ClientTimeout:    60 * time.Second,
		// Shorter than the common upstream keep-alive timeouts (Node.js 5s, Apache 5s).
		UpstreamIdleTimeout: 4 * time.Second,
		Engine:              "loop",
		LoopSpin:            DefaultLoopSpin,
		AccessLog:           AccessLogOff,

		MaxBufferedBodyBytes: DefaultMaxBufferedBodyBytes,
		// Envoy's stream_idle_timeout default.
		StreamIdleTimeout: 5 * time.Minute,
	}
}

// flag is one flag of the contract: its name and help, the Args field it sets, and whether
// Render writes it even at its default (the flags the injector has always written, so that a
// pod's spec shows what its proxy enforces). Every other flag is rendered only when it differs
// from its default.
type flag struct {
	name   string
	usage  string
	always bool
	field  func(a *Args) any // a pointer to the field: *string, *int, *bool, *time.Duration or *[]string
}

// flags, in the order of --help and of Render.
var flags = []flag{
	{"listen", "data listener (apps reach it through HTTP_PROXY)", true, func(a *Args) any { return &a.Listen }},
	{"admin", "admin listener: /metrics, /healthz, /readyz", true, func(a *Args) any { return &a.Admin }},
	{"service", "this workload's service name (for logs and metrics)", true, func(a *Args) any { return &a.Service }},
	{"namespace", "this pod's namespace (default $" + NamespaceEnv + "): a host NAME.NAMESPACE[.svc[.cluster.local]] in it names upstream NAME, one in another namespace does not; empty: any namespace", false, func(a *Args) any { return &a.Namespace }},
	{"upstreams", "upstreams and attempts per call: NAME[=ATTEMPTS][*CALLS], comma separated", false, func(a *Args) any { return &a.Upstreams }},
	{"dedup-upstreams", "upstreams (of --upstreams) that deduplicate requests by Idempotency-Key, comma separated: toward them a key the entry proxy generated makes a POST/PATCH retryable too; toward any other only a key the client sent does", false, func(a *Args) any { return &a.DedupUpstreams }},
	{"entrypoint", "this proxy is at a chain entry (generates Idempotency-Keys, remembers per-key spend)", true, func(a *Args) any { return &a.Entrypoint }},
	{"chain-cap", "chain budget cap (maxAmplification); 0 turns chain budgeting off", true, func(a *Args) any { return &a.ChainCap }},
	{"default-attempts", "attempts for an upstream listed without =N", true, func(a *Args) any { return &a.DefaultAttempts }},
	{"per-try-timeout", "timeout of one attempt up to the response headers (time to first byte), 1ms..1h, which is all the retry decision reads; a body of known length up to 64 KiB is read within it too, a larger or chunked one then streams to the client, cut after 60s without a byte", true, func(a *Args) any { return &a.PerTryTimeout }},
	{"max-time-to-answer", "the most a call through this proxy may take (the entrypoint's maxTimeToAnswer), 1ms..24h; 0: none. Sets Retrycap-Deadline (ms left) on the request when the caller sent none or a larger one (a caller can lower it, never raise it); every proxy below forwards it reduced by the time spent, bounds each attempt by it, starts no retry that cannot finish in it and answers 504 once it is gone", false, func(a *Args) any { return &a.MaxTimeToAnswer }},
	{"backoff-base", "backoff base: retry n waits uniform(0, min(max, base*2^(n-1))); 0 (no wait) or 1ms..1m", true, func(a *Args) any { return &a.BackoffBase }},
	{"backoff-max", "backoff cap, at least --backoff-base; 0 (no wait) or 1ms..1m", true, func(a *Args) any { return &a.BackoffMax }},
	{"backoff-jitter", "full jitter; false waits exactly min(max, base*2^(n-1)) (the storm lab's naive arm)", false, func(a *Args) any { return &a.BackoffJitter }},
	{"retry-on", "retryable failures: connect-failure, reset, timeout, 5xx, status codes, gRPC status names (unavailable, ...)", true, func(a *Args) any { return &a.RetryOn }},
	{"retry-methods", "methods retried without an Idempotency-Key", true, func(a *Args) any { return &a.RetryMethods }},
	{"budget-percent", "retry budget: percent of requests in the window", true, func(a *Args) any { return &a.BudgetPercent }},
	{"budget-min-per-second", "retry budget floor, retries per second", true, func(a *Args) any { return &a.BudgetMinPerSecond }},
	{"budget-window", "retry budget window, 1ms..60s", true, func(a *Args) any { return &a.BudgetWindow }},
	{"breaker-failures", "failures within --breaker-window that open the breaker; 0 disables it", true, func(a *Args) any { return &a.BreakerFailures }},
	{"breaker-window", "breaker failure window, 1ms..1h", true, func(a *Args) any { return &a.BreakerWindow }},
	{"breaker-open-for", "how long an open breaker fails fast before a half-open probe, 1ms..1h", true, func(a *Args) any { return &a.BreakerOpenFor }},
	{"max-replay-bytes", "largest request body that is retried", false, func(a *Args) any { return &a.MaxReplayBytes }},
	{"max-buffered-body-bytes", "request body bytes the HTTP/1.1 engines hold in memory at once, proxy-wide, 64 KiB..1 GiB (a body is read whole before it is forwarded, to replay it): a sixteenth is kept for bodies up to 64 KiB; a request whose body does not fit beside those in flight gets 503 with Retry-After: 1 and is not sent (a chunked body that outgrows its share waits for room, oldest first, up to its read deadline); the default, 32 MiB, fits the sidecar's 64Mi memory limit", false, func(a *Args) any { return &a.MaxBufferedBodyBytes }},
	{"key-ttl", "how long an entry proxy remembers an Idempotency-Key's spend", false, func(a *Args) any { return &a.KeyTTL }},
	{"resolve", "static resolution NAME=HOST:PORT, comma separated", false, func(a *Args) any { return &a.Resolve }},
	{"drain-timeout", "on SIGTERM, how long in-flight requests may take to finish", false, func(a *Args) any { return &a.DrainTimeout }},
	{"http-request-timeout", "a request head must arrive whole within this, from its first byte (from the accept for a connection's first request): 408 and close after it (HAProxy's timeout http-request); cuts silent connections, partial heads and slowloris", false, func(a *Args) any { return &a.HTTPRequestTimeout }},
	{"keepalive-timeout", "a client connection idle between requests closes after this (HAProxy's timeout http-keep-alive)", false, func(a *Args) any { return &a.KeepAliveTimeout }},
	{"client-timeout", "a request body must arrive within this once its head is read: 408 and close after it (HAProxy's timeout client)", false, func(a *Args) any { return &a.ClientTimeout }},
	{"upstream-idle-timeout", "a pooled upstream connection idle this long is closed, not reused: keep it below the upstreams' own keep-alive timeouts (Node.js: 5s); a request that fails on a reused connection before any answer byte is re-sent once on a fresh one only if no byte of it was written or it is replayable (a keyless POST that was written gets 502)", false, func(a *Args) any { return &a.UpstreamIdleTimeout }},
	{"stream-idle-timeout", "an HTTP/2 or gRPC stream on which no frame of the call (headers, data, trailers) came from its client or its upstream for this long is ended, as Envoy's stream_idle_timeout: 408 (gRPC DEADLINE_EXCEEDED) before the answer began, else the stream cut (gRPC: DEADLINE_EXCEEDED trailers), the upstream stream reset, never retried; 0 never ends one (a stream quiet for longer, as a watch, needs a longer value, 0, or messages of its own); at most 24h", false, func(a *Args) any { return &a.StreamIdleTimeout }},
	{"engine", "I/O engine: loop (epoll event loops, GOMAXPROCS of them; Linux) or goroutine (a goroutine per connection); loop hands what it does not serve itself (CONNECT, upgrades, streamed request bodies, unknown hosts) to goroutine", false, func(a *Args) any { return &a.Engine }},
	{"loop-spin", "how long an event loop whose recent waits were all shorter than this polls for events before it sleeps, yielding its CPU to any other runnable thread between polls (0: never, the default; at most 1ms; 50us is what was measured); a loop that waits longer never spins", false, func(a *Args) any { return &a.LoopSpin }},
	{"pass-interim-answers", "pass an upstream's interim answers (1xx but 100 and 101: 103 Early Hints, 102 Processing) on to HTTP/1.1 and plain HTTP/2 clients (never gRPC), up to 64 KiB of them per call, as HAProxy does; an attempt whose 1xx went out is then not retried. Off (the default) they are dropped: Python's http.client, and so requests and urllib3, take a 103 for the final answer", false, func(a *Args) any { return &a.PassInterimAnswers }},
	{"check", "validate the flags, print the effective configuration and exit", false, func(a *Args) any { return &a.Check }},
	{"access-log", "per-attempt access log, JSON lines (retrycap observe reads them): off, stdout, or a file path (appended to); written by a background writer, lines dropped and counted in retrycap_proxy_access_log_dropped_total when it falls behind", false, func(a *Args) any { return &a.AccessLog }},
}

// FlagNames are the names of every flag of the contract, in the order of --help.
func FlagNames() []string {
	names := make([]string, len(flags))
	for i, f := range flags {
		names[i] = f.name
	}
	return names
}

// Bind registers every flag on fs, each with a's value as its default and a's field as its
// destination: a := Defaults(); a.Bind(fs); fs.Parse(args).
func (a *Args) Bind(fs *pflag.FlagSet) {
	for _, f := range flags {
		switch p := f.field(a).(type) {
		case *string:
			fs.StringVar(p, f.name, *p, f.usage)
		case *int:
			fs.IntVar(p, f.name, *p, f.usage)
		case *bool:
			fs.BoolVar(p, f.name, *p, f.usage)
		case *time.Duration:
			fs.DurationVar(p, f.name, *p, f.usage)
		case *[]string:
			fs.StringSliceVar(p, f.name, *p, f.usage)
		default:
			panic(fmt.Sprintf("sidecar: flag %s has a field of type %T", f.name, p))
		}
	}
}

// NewFlagSet is the proxy's flag set, bound to a: named retrycap-proxy, errors returned (not
// exited on), usage and errors written to out, flags listed in the contract's order.
func NewFlagSet(a *Args, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("retrycap-proxy", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.SortFlags = false
	a.Bind(fs)
	return fs
}

// Parse reads a command line into Args, starting from Defaults. It checks the syntax of each
// flag (pflag's errors name flag and value) and that there are no positional arguments; the
// proxy validates the values.
func Parse(args []string) (Args, error) {
	a := Defaults()
	fs := NewFlagSet(&a, io.Discard)
	if err := fs.Parse(args); err != nil {
		return Args{}, err
	}
	if fs.NArg() > 0 {
		return Args{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return a, nil
}

// Render writes a as a command line, one "--name=value" per flag, in the contract's order: the
// flags the injector has always written, and any other that differs from its default. Durations
// are written the way a person would ("2s", "100ms", "1m30s", not Go's "1m0s").
func (a Args) Render() []string {
	def := Defaults()
	out := make([]string, 0, len(flags))
	for _, f := range flags {
		v := f.field(&a)
		if !f.always && equal(v, f.field(&def)) {
			continue
		}
		out = append(out, "--"+f.name+"="+format(v))
	}
	return out
}

func equal(a, b any) bool {
	switch a := a.(type) {
	case *string:
		return *a == *b.(*string)
	case *int:
		return *a == *b.(*int)
	case *bool:
		return *a == *b.(*bool)
	case *time.Duration:
		return *a == *b.(*time.Duration)
	case *[]string:
		return slices.Equal(*a, *b.(*[]string))
	}
	panic(fmt.Sprintf("sidecar: no equality for %T", a))
}

func format(v any) string {
	switch v := v.(type) {
	case *string:
		return *v
	case *int:
		return strconv.Itoa(*v)
	case *bool:
		return strconv.FormatBool(*v)
	case *time.Duration:
		return Duration(*v)
	case *[]string:
		return csvLine(*v)
	}
	panic(fmt.Sprintf("sidecar: no format for %T", v))
}

// Duration writes a duration the way a person would ("2s", "100ms", "1m30s", "1h"), not Go's
// "1m0s"; time.ParseDuration reads both.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// csvLine writes a list as pflag's string slices read it: comma separated, an element quoted
// only if it needs to be (a comma, a quote, a leading space), so plain elements are simply
// joined with commas.
func csvLine(l []string) string {
	if len(l) == 0 {
		return ""
	}
	if len(l) == 1 && l[0] == "" {
		return `""` // csv writes a lone empty field as nothing, which reads as no element
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(l) // a bytes.Buffer does not fail
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}
