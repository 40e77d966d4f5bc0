package policy

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is the wait before retry n (1-based): with jitter uniform(0, c),
// without it c, where c = min(max, base x 2^(n-1)) (max <= 0: no cap). Full
// jitter spreads retries out in time; the no-jitter form exists for the
// storm lab's naive arm. The doubling saturates at max (or at the largest
// duration) instead of wrapping: a wrapped backoff is negative or 0, an
// immediate retry for every caller at once, a retry storm. The proxy's
// flags bound base and max (1ms..1m), so the saturation is for any other
// caller; it never panics, whatever the arguments.
func Backoff(base, max time.Duration, n int, jitter bool) time.Duration {
	if base <= 0 || n < 1 {
		return 0
	}
	limit := max
	if limit <= 0 {
		limit = math.MaxInt64
	}
	c := min(base, limit)
	for i := 1; i < n && c < limit; i++ {
		if c > limit/2 {
			c = limit
			break
		}
		c *= 2
	}
	if !jitter {
		return c
	}
	// math/rand/v2's top-level functions use a per-thread source: no lock,
	// no allocation. Unsigned, so that c+1 cannot wrap at the largest c.
	return time.Duration(rand.Uint64N(uint64(c) + 1))
}
