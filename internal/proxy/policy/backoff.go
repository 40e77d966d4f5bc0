package policy

import (
	"math/rand/v2"
	"time"
)

// Backoff is the wait before retry n (1-based): with jitter uniform(0, c),
// without it c, where c = min(max, base x 2^(n-1)). Full jitter spreads
// retries out in time; the no-jitter form exists for the storm lab's naive arm.
func Backoff(base, max time.Duration, n int, jitter bool) time.Duration {
	if base <= 0 || n < 1 {
		return 0
	}
	c := base
	for i := 1; i < n && c < max; i++ {
		c *= 2
	}
	if max > 0 && c > max {
		c = max
	}
	if !jitter {
		return c
	}
	// math/rand/v2's top-level functions use a per-thread source: no lock,
	// no allocation.
	return time.Duration(rand.Int64N(int64(c) + 1))
}
