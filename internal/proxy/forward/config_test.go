package forward

import (
	"time"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// testConfig is the proxy's flag defaults with --upstreams backend=3
// --chain-cap 4.
func testConfig() *Config {
	ro, err := policy.ParseRetryOn("connect-failure,reset,502,503,504")
	if err != nil {
		panic(err)
	}
	return &Config{
		Upstreams: []UpstreamConfig{{Name: "backend", Attempts: 3}}, ChainCap: 4,
		PerTryTimeout: 2 * time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second, BackoffJitter: true,
		RetryOn: ro, RetryMethods: []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"},
		BudgetPercent: 20, BudgetMinPerSecond: 10, BudgetWindow: 10 * time.Second,
		BreakerFailures: 50, BreakerWindow: 30 * time.Second, BreakerOpenFor: 10 * time.Second,
		MaxReplayBytes: 64 << 10, KeyTTL: time.Minute, Resolve: map[string]string{},
	}
}
