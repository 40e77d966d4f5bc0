package proxy

import "github.com/retrycap/retrycap/internal/proxy/forward"

// forwardConfig is what the forwarding core and the engines take of the
// flags.
func forwardConfig(c *Config) *forward.Config {
	ups := make([]forward.UpstreamConfig, 0, len(c.Upstreams))
	for _, u := range c.Upstreams {
		ups = append(ups, forward.UpstreamConfig{Name: u.Name, Attempts: c.attemptsFor(u), Dedup: u.Dedup, PerTryTimeout: u.PerTryTimeout})
	}
	return &forward.Config{
		Upstreams:          ups,
		Entrypoint:         c.Entrypoint,
		ChainCap:           c.ChainCap,
		PerTryTimeout:      c.PerTryTimeout,
		MaxTimeToAnswer:    c.MaxTimeToAnswer,
		BackoffBase:        c.BackoffBase,
		BackoffMax:         c.BackoffMax,
		BackoffJitter:      c.BackoffJitter,
		RetryOn:            c.RetryOn,
		RetryMethods:       c.RetryMethods,
		BudgetPercent:      c.BudgetPercent,
		BudgetMinPerSecond: c.BudgetMinPerSecond,
		BudgetWindow:       c.BudgetWindow,
		BreakerFailures:    c.BreakerFailures,
		BreakerWindow:      c.BreakerWindow,
		BreakerOpenFor:     c.BreakerOpenFor,
		MaxReplayBytes:     c.MaxReplayBytes,
		KeyTTL:             c.KeyTTL,
		Resolve:            c.Resolve,
		Namespace:          c.Namespace,

		HTTPRequestTimeout:  c.HTTPRequestTimeout,
		KeepAliveTimeout:    c.KeepAliveTimeout,
		ClientTimeout:       c.ClientTimeout,
		UpstreamIdleTimeout: c.UpstreamIdleTimeout,
		LoopSpin:            c.LoopSpin,
		PassInterim:         c.PassInterimAnswers,

		MaxBufferedBodyBytes: int64(c.MaxBufferedBodyBytes),
		BodyIdle:             c.bodyIdle,
	}
}
