package forward

import (
	"time"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Config is what the forwarding core and the engines need of the proxy's
// configuration (package proxy builds it from the flags).
type Config struct {
	// Upstreams are the --upstreams entries, attempts resolved (>= 1).
	Upstreams     []UpstreamConfig
	Entrypoint    bool
	ChainCap      int
	PerTryTimeout time.Duration
	// MaxTimeToAnswer is --max-time-to-answer: the bound on a call's deadline (0: none).
	MaxTimeToAnswer    time.Duration
	BackoffBase        time.Duration
	BackoffMax         time.Duration
	BackoffJitter      bool
	RetryOn            policy.RetryOn
	RetryMethods       []string
	BudgetPercent      int
	BudgetMinPerSecond int
	BudgetWindow       time.Duration
	BreakerFailures    int
	BreakerWindow      time.Duration
	BreakerOpenFor     time.Duration
	MaxReplayBytes     int
	KeyTTL             time.Duration
	// Resolve is --resolve: lower-case host name -> host:port.
	Resolve map[string]string
	// Namespace is the pod's namespace (--namespace): host names are matched to upstreams by
	// the graph's rule in it (annotations.UpstreamNode); empty keeps the lenient match.
	Namespace string
	// Connection management: --http-request-timeout, --keepalive-timeout, --client-timeout,
	// --upstream-idle-timeout.
	HTTPRequestTimeout  time.Duration
	KeepAliveTimeout    time.Duration
	ClientTimeout       time.Duration
	UpstreamIdleTimeout time.Duration
	// LoopSpin is --loop-spin: how long a busy event loop polls before it
	// sleeps (0: never).
	LoopSpin time.Duration
	// PassInterim is --pass-interim-answers: an upstream's 1xx (but 100
	// and 101) go on to HTTP/1.1 clients (Exchange.Interim).
	PassInterim bool
	// MaxBufferedBodyBytes is --max-buffered-body-bytes (0: its default): the
	// BodyBudget's size.
	MaxBufferedBodyBytes int64
	// BodyIdle is how long a streamed answer's body may make no progress,
	// read from the upstream or written to the client (0: BodyIdleTimeout;
	// no flag, a test's shorter bound).
	BodyIdle time.Duration
}

// StreamIdle is c.BodyIdle, BodyIdleTimeout if unset.
func (c *Config) StreamIdle() time.Duration {
	if c.BodyIdle > 0 {
		return c.BodyIdle
	}
	return BodyIdleTimeout
}

// UpstreamConfig is one --upstreams entry.
type UpstreamConfig struct {
	Name     string
	Attempts int
	// Dedup: the upstream is declared to deduplicate requests by
	// Idempotency-Key (--dedup-upstreams), so that any key, a generated one
	// included, makes a POST or PATCH to it retryable (policy.KeyRetryable).
	Dedup bool
	// PerTryTimeout is the upstream's own per-try timeout (the upstreams
	// grammar's "/TIMEOUT"); 0: Config.PerTryTimeout.
	PerTryTimeout time.Duration
}
