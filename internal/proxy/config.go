package proxy

import (
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/proxy/policy"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// Config is the effective configuration of one proxy: the command line (sidecar.Args, the
// contract the injector renders) and what validate derives from it. Upstreams, RetryOn and
// Resolve are the parsed forms; the flags as written are c.Args.Upstreams, c.Args.RetryOn and
// c.Args.Resolve.
type Config struct {
	sidecar.Args
	Upstreams []policy.Upstream
	RetryOn   policy.RetryOn
	Resolve   map[string]string
	// bodyIdle is forward.Config.BodyIdle: a test's (no flag sets it).
	bodyIdle time.Duration
}

// Defaults are the flag defaults (sidecar.Defaults); the retry ones are the RetryPolicy
// defaults.
func Defaults() Config {
	return Config{Args: sidecar.Defaults()}
}

// maxReplayBytesMax bounds --max-replay-bytes: a request body up to it is held in memory.
const maxReplayBytesMax = 1 << 30

// minBufferedBody is --max-buffered-body-bytes' least: the largest body the
// event loop reads whole (forward.BufferedBodyMax), so that one such request
// alone always fits.
const minBufferedBody = 64 << 10

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
	c.Namespace = os.Getenv(sidecar.NamespaceEnv) // the downward API's, in an injected pod
	fs := c.flagSet(out)
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

// flagSet is the proxy's flags, bound to c: the sidecar contract's, and no other.
func (c *Config) flagSet(out io.Writer) *pflag.FlagSet { return sidecar.NewFlagSet(&c.Args, out) }

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
	// One port for both: --check passed and the run failed to bind the second.
	lh, lp, _ := net.SplitHostPort(c.Listen)
	ah, ap, _ := net.SplitHostPort(c.Admin)
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	if lp == ap && lp != "0" && (lh == ah || wildcard(lh) || wildcard(ah)) {
		return bad("admin", c.Admin, "the port of --listen (%s): want another", c.Listen)
	}
	for _, n := range []struct{ flag, v string }{{"namespace", c.Namespace}, {"service", c.Service}} {
		if n.v == "" {
			continue
		}
		if reason := annotations.ValidateLabel(n.v); reason != "" {
			return bad(n.flag, n.v, "not a DNS-1123 label: %s", reason)
		}
	}
	ups, err := policy.ParseUpstreams(c.Args.Upstreams)
	if err != nil {
		return &FlagError{Flag: "upstreams", Value: c.Args.Upstreams, Err: err}
	}
	c.Upstreams = ups
	if strings.TrimSpace(c.DedupUpstreams) != "" {
		for _, tok := range strings.Split(c.DedupUpstreams, ",") {
			name := strings.ToLower(strings.TrimSpace(tok))
			i := slices.IndexFunc(c.Upstreams, func(u policy.Upstream) bool { return strings.EqualFold(u.Name, name) })
			if i < 0 {
				return bad("dedup-upstreams", c.DedupUpstreams, "%q is not an upstream of --upstreams (%s)", name, c.Args.Upstreams)
			}
			c.Upstreams[i].Dedup = true
		}
	}
	if c.ChainCap < 0 || c.ChainCap > defaults.MaxAmplificationMax {
		return bad("chain-cap", strconv.Itoa(c.ChainCap), "must be 0 (off) or %d..%d", defaults.MaxAmplificationMin, defaults.MaxAmplificationMax)
	}
	if c.DefaultAttempts < defaults.AttemptsMin || c.DefaultAttempts > defaults.AttemptsMax {
		return bad("default-attempts", strconv.Itoa(c.DefaultAttempts), "must be %d..%d", defaults.AttemptsMin, defaults.AttemptsMax)
	}
	// Every duration is bounded (docs/decisions.md, "Every duration is bounded"): the
	// RetryPolicy's fields by the CRD's bounds, so the injector never renders what is refused
	// here; the proxy's own timeouts by a day. Each bound also keeps the sums the proxy makes
	// (attempts x per-try timeout, the clock plus a timeout) inside int64 nanoseconds.
	type bound struct {
		flag    string
		d       time.Duration
		lo, hi  time.Duration
		zeroOff string // "" : 0 is refused; else what 0 means
	}
	for _, b := range []bound{
		{"per-try-timeout", c.PerTryTimeout, defaults.PerTryTimeoutMin, defaults.PerTryTimeoutMax, ""},
		{"max-time-to-answer", c.MaxTimeToAnswer, defaults.MaxTimeToAnswerMin, defaults.MaxTimeToAnswerMax, "none"},
		{"backoff-base", c.BackoffBase, defaults.BackoffBoundMin, defaults.BackoffBoundMax, "no wait"},
		{"backoff-max", c.BackoffMax, defaults.BackoffBoundMin, defaults.BackoffBoundMax, "no wait"},
		// Below the CRD's 1s the proxy takes down to 1ms (the tests' short windows); the
		// injector never renders less than 1s.
		{"budget-window", c.BudgetWindow, time.Millisecond, defaults.BudgetWindowMax, ""},
		{"breaker-window", c.BreakerWindow, defaults.BreakerWindowMin, defaults.BreakerWindowMax, ""},
		{"breaker-open-for", c.BreakerOpenFor, defaults.BreakerOpenForMin, defaults.BreakerOpenForMax, ""},
		{"key-ttl", c.KeyTTL, time.Nanosecond, defaults.ProxyTimeoutMax, ""},
		{"drain-timeout", c.DrainTimeout, time.Nanosecond, defaults.ProxyTimeoutMax, ""},
		{"http-request-timeout", c.HTTPRequestTimeout, time.Nanosecond, defaults.ProxyTimeoutMax, ""},
		{"keepalive-timeout", c.KeepAliveTimeout, time.Nanosecond, defaults.ProxyTimeoutMax, ""},
		{"client-timeout", c.ClientTimeout, time.Nanosecond, defaults.ProxyTimeoutMax, ""},
		{"upstream-idle-timeout", c.UpstreamIdleTimeout, time.Nanosecond, defaults.ProxyTimeoutMax, ""},
		{"stream-idle-timeout", c.StreamIdleTimeout, time.Millisecond, defaults.ProxyTimeoutMax, "never"},
	} {
		if b.d == 0 && b.zeroOff != "" {
			continue
		}
		if b.d < b.lo || b.d > b.hi {
			lo, hi := defaults.FormatDuration(b.lo), defaults.FormatDuration(b.hi)
			switch {
			case b.zeroOff != "":
				return bad(b.flag, sidecar.Duration(b.d), "must be 0 (%s) or %s..%s", b.zeroOff, lo, hi)
			case b.lo == time.Nanosecond:
				return bad(b.flag, sidecar.Duration(b.d), "must be > 0 and at most %s", hi)
			}
			return bad(b.flag, sidecar.Duration(b.d), "must be %s..%s", lo, hi)
		}
	}
	if c.BackoffMax < c.BackoffBase {
		return bad("backoff-max", sidecar.Duration(c.BackoffMax), "must be >= --backoff-base (%s)", sidecar.Duration(c.BackoffBase))
	}
	ro, err := policy.ParseRetryOn(c.Args.RetryOn)
	if err != nil {
		return &FlagError{Flag: "retry-on", Value: c.Args.RetryOn, Err: err}
	}
	c.RetryOn = ro
	for i, m := range c.RetryMethods {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "" || strings.IndexFunc(m, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
			return bad("retry-methods", strings.Join(c.RetryMethods, ","), "%q is not an HTTP method", m)
		}
		c.RetryMethods[i] = m
	}
	if c.BudgetPercent < defaults.BudgetPercentMin || c.BudgetPercent > defaults.BudgetPercentMax {
		return bad("budget-percent", strconv.Itoa(c.BudgetPercent), "must be %d..%d", defaults.BudgetPercentMin, defaults.BudgetPercentMax)
	}
	if c.BudgetMinPerSecond < 0 {
		return bad("budget-min-per-second", strconv.Itoa(c.BudgetMinPerSecond), "must be >= 0")
	}
	if c.BreakerFailures < 0 {
		return bad("breaker-failures", strconv.Itoa(c.BreakerFailures), "must be >= 0 (0 disables the breaker)")
	}
	if c.MaxReplayBytes < 0 || c.MaxReplayBytes > maxReplayBytesMax {
		return bad("max-replay-bytes", strconv.Itoa(c.MaxReplayBytes), "must be 0..%d (1 GiB: a body up to it is held in memory per request)", maxReplayBytesMax)
	}
	if c.MaxBufferedBodyBytes < minBufferedBody || c.MaxBufferedBodyBytes > maxReplayBytesMax {
		return bad("max-buffered-body-bytes", strconv.Itoa(c.MaxBufferedBodyBytes), "must be %d..%d (64 KiB: a body the event loop reads whole; 1 GiB)", minBufferedBody, maxReplayBytesMax)
	}
	if c.Engine != "loop" && c.Engine != "goroutine" {
		return bad("engine", c.Engine, "must be loop or goroutine")
	}
	if c.LoopSpin < 0 || c.LoopSpin > time.Millisecond {
		return bad("loop-spin", c.LoopSpin.String(), "must be 0 (never) or at most 1ms")
	}
	if strings.TrimSpace(c.AccessLog) == "" {
		return bad("access-log", c.AccessLog, "must be off, stdout or a file path")
	}
	c.Resolve = map[string]string{}
	if strings.TrimSpace(c.Args.Resolve) != "" {
		for _, tok := range strings.Split(c.Args.Resolve, ",") {
			tok = strings.TrimSpace(tok)
			name, addr, ok := strings.Cut(tok, "=")
			if !ok || name == "" {
				return bad("resolve", c.Args.Resolve, "entry %q: want NAME=HOST:PORT", tok)
			}
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				return bad("resolve", c.Args.Resolve, "entry %q: want NAME=HOST:PORT: %v", tok, err)
			}
			// Checked here, not at each dial ("invalid port"); port 0 dials nothing.
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return bad("resolve", c.Args.Resolve, "entry %q: port %s: want 1..65535", tok, port)
			}
			// Names are matched case-insensitively: a second entry for one silently won.
			if _, dup := c.Resolve[strings.ToLower(name)]; dup {
				return bad("resolve", c.Args.Resolve, "entry %q: %s is resolved twice", tok, strings.ToLower(name))
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
		if u.PerTryTimeout > 0 {
			ups = append(ups, fmt.Sprintf("%s=%d/%s*%d", u.Name, c.attemptsFor(u), u.PerTryTimeout, u.Calls))
			continue
		}
		ups = append(ups, fmt.Sprintf("%s=%d*%d", u.Name, c.attemptsFor(u), u.Calls))
	}
	res := make([]string, 0, len(c.Resolve))
	for k, v := range c.Resolve {
		res = append(res, k+"="+v)
	}
	sort.Strings(res)
	fmt.Fprintf(w, "listen %s\nadmin %s\nservice %s\nnamespace %s\nupstreams %s\nentrypoint %t\nchain-cap %d\n",
		c.Listen, c.Admin, c.Service, c.Namespace, strings.Join(ups, ","), c.Entrypoint, c.ChainCap)
	var dedup []string
	for _, u := range c.Upstreams {
		if u.Dedup {
			dedup = append(dedup, u.Name)
		}
	}
	fmt.Fprintf(w, "dedup-upstreams %s\n", strings.Join(dedup, ","))
	fmt.Fprintf(w, "max-time-to-answer %s\n", c.MaxTimeToAnswer)
	fmt.Fprintf(w, "default-attempts %d\nper-try-timeout %s\nbackoff-base %s\nbackoff-max %s\nbackoff-jitter %t\n",
		c.DefaultAttempts, c.PerTryTimeout, c.BackoffBase, c.BackoffMax, c.BackoffJitter)
	fmt.Fprintf(w, "retry-on %s\nretry-methods %s\nbudget-percent %d\nbudget-min-per-second %d\nbudget-window %s\n",
		c.RetryOn.String(), strings.Join(c.RetryMethods, ","), c.BudgetPercent, c.BudgetMinPerSecond, c.BudgetWindow)
	fmt.Fprintf(w, "breaker-failures %d\nbreaker-window %s\nbreaker-open-for %s\nmax-replay-bytes %d\nkey-ttl %s\nresolve %s\ndrain-timeout %s\n",
		c.BreakerFailures, c.BreakerWindow, c.BreakerOpenFor, c.MaxReplayBytes, c.KeyTTL, strings.Join(res, ","), c.DrainTimeout)
	fmt.Fprintf(w, "http-request-timeout %s\nkeepalive-timeout %s\nclient-timeout %s\nupstream-idle-timeout %s\nengine %s\n",
		c.HTTPRequestTimeout, c.KeepAliveTimeout, c.ClientTimeout, c.UpstreamIdleTimeout, c.Engine)
	fmt.Fprintf(w, "loop-spin %s\n", c.LoopSpin)
	fmt.Fprintf(w, "access-log %s\n", c.AccessLog)
	fmt.Fprintf(w, "max-buffered-body-bytes %d\n", c.MaxBufferedBodyBytes)
	fmt.Fprintf(w, "pass-interim-answers %t\n", c.PassInterimAnswers)
	fmt.Fprintf(w, "stream-idle-timeout %s\n", c.StreamIdleTimeout)
}
