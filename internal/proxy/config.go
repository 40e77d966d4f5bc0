package proxy

import (
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Config is the effective configuration of one proxy, built from flags.
type Config struct {
	Listen             string
	Admin              string
	Service            string
	UpstreamsRaw       string
	Upstreams          []policy.Upstream
	Entrypoint         bool
	ChainCap           int
	DefaultAttempts    int
	PerTryTimeout      time.Duration
	BackoffBase        time.Duration
	BackoffMax         time.Duration
	BackoffJitter      bool
	RetryOnRaw         string
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
	ResolveRaw         string
	Resolve            map[string]string
	DrainTimeout       time.Duration
	Engine             string // "loop" (event loops, Linux) or "goroutine"
	Check              bool
}

// Defaults are the flag defaults; the retry ones match the design's
// RetryPolicy defaults.
func Defaults() Config {
	return Config{
		Listen:             "127.0.0.1:15001",
		Admin:              ":15020",
		DefaultAttempts:    1,
		PerTryTimeout:      2 * time.Second,
		BackoffBase:        100 * time.Millisecond,
		BackoffMax:         2 * time.Second,
		BackoffJitter:      true,
		RetryOnRaw:         "connect-failure,reset,502,503,504",
		RetryMethods:       []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"},
		BudgetPercent:      20,
		BudgetMinPerSecond: 10,
		BudgetWindow:       10 * time.Second,
		BreakerFailures:    50,
		BreakerWindow:      30 * time.Second,
		BreakerOpenFor:     10 * time.Second,
		MaxReplayBytes:     64 << 10,
		KeyTTL:             time.Minute,
		DrainTimeout:       10 * time.Second,
		Engine:             "loop",
	}
}

// FlagError is a bad flag value; the command exits 2 on it.
type FlagError struct {
	Flag  string
	Value string
	Err   error
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("invalid value %q for --%s: %v", e.Value, e.Flag, e.Err)
}

func (e *FlagError) Unwrap() error { return e.Err }

// ParseFlags parses the command line into a validated Config. Errors are
// *FlagError (or pflag's own, which also name flag and value).
func ParseFlags(args []string, out io.Writer) (*Config, error) {
	c := Defaults()
	fs := pflag.NewFlagSet("retrycap-proxy", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.SortFlags = false
	fs.StringVar(&c.Listen, "listen", c.Listen, "data listener (apps reach it through HTTP_PROXY)")
	fs.StringVar(&c.Admin, "admin", c.Admin, "admin listener: /metrics, /healthz, /readyz")
	fs.StringVar(&c.Service, "service", c.Service, "this workload's service name (for logs and metrics)")
	fs.StringVar(&c.UpstreamsRaw, "upstreams", c.UpstreamsRaw, "upstreams and attempts per call: NAME[=ATTEMPTS][*CALLS], comma separated")
	fs.BoolVar(&c.Entrypoint, "entrypoint", c.Entrypoint, "this proxy is at a chain entry (generates Idempotency-Keys, remembers per-key spend)")
	fs.IntVar(&c.ChainCap, "chain-cap", c.ChainCap, "chain budget cap (maxAmplification); 0 turns chain budgeting off")
	fs.IntVar(&c.DefaultAttempts, "default-attempts", c.DefaultAttempts, "attempts for an upstream listed without =N")
	fs.DurationVar(&c.PerTryTimeout, "per-try-timeout", c.PerTryTimeout, "timeout of one attempt up to the response headers (time to first byte), which is all the retry decision reads; a body of known length up to 64 KiB is read within it too, a larger or chunked one then streams to the client, cut after 60s without a byte")
	fs.DurationVar(&c.BackoffBase, "backoff-base", c.BackoffBase, "backoff base: retry n waits uniform(0, min(max, base*2^(n-1)))")
	fs.DurationVar(&c.BackoffMax, "backoff-max", c.BackoffMax, "backoff cap")
	fs.BoolVar(&c.BackoffJitter, "backoff-jitter", c.BackoffJitter, "full jitter; false waits exactly min(max, base*2^(n-1)) (the storm lab's naive arm)")
	fs.StringVar(&c.RetryOnRaw, "retry-on", c.RetryOnRaw, "retryable failures: connect-failure, reset, timeout, 5xx, status codes")
	fs.StringSliceVar(&c.RetryMethods, "retry-methods", c.RetryMethods, "methods retried without an Idempotency-Key")
	fs.IntVar(&c.BudgetPercent, "budget-percent", c.BudgetPercent, "retry budget: percent of requests in the window")
	fs.IntVar(&c.BudgetMinPerSecond, "budget-min-per-second", c.BudgetMinPerSecond, "retry budget floor, retries per second")
	fs.DurationVar(&c.BudgetWindow, "budget-window", c.BudgetWindow, "retry budget window")
	fs.IntVar(&c.BreakerFailures, "breaker-failures", c.BreakerFailures, "failures within --breaker-window that open the breaker; 0 disables it")
	fs.DurationVar(&c.BreakerWindow, "breaker-window", c.BreakerWindow, "breaker failure window")
	fs.DurationVar(&c.BreakerOpenFor, "breaker-open-for", c.BreakerOpenFor, "how long an open breaker fails fast before a half-open probe")
	fs.IntVar(&c.MaxReplayBytes, "max-replay-bytes", c.MaxReplayBytes, "largest request body that is retried")
	fs.DurationVar(&c.KeyTTL, "key-ttl", c.KeyTTL, "how long an entry proxy remembers an Idempotency-Key's spend")
	fs.StringVar(&c.ResolveRaw, "resolve", c.ResolveRaw, "static resolution NAME=HOST:PORT, comma separated")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "on SIGTERM, how long in-flight requests may take to finish")
	fs.StringVar(&c.Engine, "engine", c.Engine, "I/O engine: loop (epoll event loops, GOMAXPROCS of them; Linux) or goroutine (a goroutine per connection); loop hands what it does not serve itself (CONNECT, upgrades, streamed request bodies, unknown hosts) to goroutine")
	fs.BoolVar(&c.Check, "check", c.Check, "validate the flags, print the effective configuration and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate() error {
	bad := func(flag, val string, format string, a ...any) error {
		return &FlagError{Flag: flag, Value: val, Err: fmt.Errorf(format, a...)}
	}
	for _, l := range []struct{ flag, v string }{{"listen", c.Listen}, {"admin", c.Admin}} {
		if _, port, err := net.SplitHostPort(l.v); err != nil {
			return &FlagError{Flag: l.flag, Value: l.v, Err: fmt.Errorf("want HOST:PORT: %w", err)}
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return bad(l.flag, l.v, "port must be 0..65535")
		}
	}
	ups, err := policy.ParseUpstreams(c.UpstreamsRaw)
	if err != nil {
		return &FlagError{Flag: "upstreams", Value: c.UpstreamsRaw, Err: err}
	}
	c.Upstreams = ups
	if c.ChainCap < 0 || c.ChainCap > 1000 {
		return bad("chain-cap", strconv.Itoa(c.ChainCap), "must be 0 (off) or 1..1000")
	}
	if c.DefaultAttempts < 1 || c.DefaultAttempts > 100 {
		return bad("default-attempts", strconv.Itoa(c.DefaultAttempts), "must be 1..100")
	}
	pos := []struct {
		flag string
		d    time.Duration
	}{{"per-try-timeout", c.PerTryTimeout}, {"budget-window", c.BudgetWindow}, {"breaker-window", c.BreakerWindow},
		{"breaker-open-for", c.BreakerOpenFor}, {"key-ttl", c.KeyTTL}, {"drain-timeout", c.DrainTimeout}}
	for _, p := range pos {
		if p.d <= 0 {
			return bad(p.flag, p.d.String(), "must be > 0")
		}
	}
	if c.BackoffBase < 0 {
		return bad("backoff-base", c.BackoffBase.String(), "must be >= 0")
	}
	if c.BackoffMax < c.BackoffBase {
		return bad("backoff-max", c.BackoffMax.String(), "must be >= --backoff-base (%s)", c.BackoffBase)
	}
	ro, err := policy.ParseRetryOn(c.RetryOnRaw)
	if err != nil {
		return &FlagError{Flag: "retry-on", Value: c.RetryOnRaw, Err: err}
	}
	c.RetryOn = ro
	for i, m := range c.RetryMethods {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "" || strings.IndexFunc(m, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
			return bad("retry-methods", strings.Join(c.RetryMethods, ","), "%q is not an HTTP method", m)
		}
		c.RetryMethods[i] = m
	}
	if c.BudgetPercent < 0 || c.BudgetPercent > 100 {
		return bad("budget-percent", strconv.Itoa(c.BudgetPercent), "must be 0..100")
	}
	if c.BudgetMinPerSecond < 0 {
		return bad("budget-min-per-second", strconv.Itoa(c.BudgetMinPerSecond), "must be >= 0")
	}
	if c.BreakerFailures < 0 {
		return bad("breaker-failures", strconv.Itoa(c.BreakerFailures), "must be >= 0 (0 disables the breaker)")
	}
	if c.MaxReplayBytes < 0 {
		return bad("max-replay-bytes", strconv.Itoa(c.MaxReplayBytes), "must be >= 0")
	}
	if c.Engine != "loop" && c.Engine != "goroutine" {
		return bad("engine", c.Engine, "must be loop or goroutine")
	}
	c.Resolve = map[string]string{}
	if strings.TrimSpace(c.ResolveRaw) != "" {
		for _, tok := range strings.Split(c.ResolveRaw, ",") {
			tok = strings.TrimSpace(tok)
			name, addr, ok := strings.Cut(tok, "=")
			if !ok || name == "" {
				return bad("resolve", c.ResolveRaw, "entry %q: want NAME=HOST:PORT", tok)
			}
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return bad("resolve", c.ResolveRaw, "entry %q: want NAME=HOST:PORT: %v", tok, err)
			}
			c.Resolve[strings.ToLower(name)] = addr
		}
	}
	return nil
}

// attemptsFor is an upstream's attempts with the default applied.
func (c *Config) attemptsFor(u policy.Upstream) int {
	if u.Attempts > 0 {
		return u.Attempts
	}
	return c.DefaultAttempts
}

// Describe renders the effective configuration (for --check), one
// "flag value" pair a line, so an injector's command line can be compared.
func (c *Config) Describe(w io.Writer) {
	ups := make([]string, 0, len(c.Upstreams))
	for _, u := range c.Upstreams {
		ups = append(ups, fmt.Sprintf("%s=%d*%d", u.Name, c.attemptsFor(u), u.Calls))
	}
	res := make([]string, 0, len(c.Resolve))
	for k, v := range c.Resolve {
		res = append(res, k+"="+v)
	}
	sort.Strings(res)
	fmt.Fprintf(w, "listen %s\nadmin %s\nservice %s\nupstreams %s\nentrypoint %t\nchain-cap %d\n",
		c.Listen, c.Admin, c.Service, strings.Join(ups, ","), c.Entrypoint, c.ChainCap)
	fmt.Fprintf(w, "default-attempts %d\nper-try-timeout %s\nbackoff-base %s\nbackoff-max %s\nbackoff-jitter %t\n",
		c.DefaultAttempts, c.PerTryTimeout, c.BackoffBase, c.BackoffMax, c.BackoffJitter)
	fmt.Fprintf(w, "retry-on %s\nretry-methods %s\nbudget-percent %d\nbudget-min-per-second %d\nbudget-window %s\n",
		c.RetryOn.String(), strings.Join(c.RetryMethods, ","), c.BudgetPercent, c.BudgetMinPerSecond, c.BudgetWindow)
	fmt.Fprintf(w, "breaker-failures %d\nbreaker-window %s\nbreaker-open-for %s\nmax-replay-bytes %d\nkey-ttl %s\nresolve %s\ndrain-timeout %s\nengine %s\n",
		c.BreakerFailures, c.BreakerWindow, c.BreakerOpenFor, c.MaxReplayBytes, c.KeyTTL, strings.Join(res, ","), c.DrainTimeout, c.Engine)
}
