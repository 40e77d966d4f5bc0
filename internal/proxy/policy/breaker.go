package policy

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is the state of a circuit breaker.
type BreakerState int32

// Breaker states; the numbers are what the breaker-state metric reports.
const (
	BreakerClosed   BreakerState = 0
	BreakerOpen     BreakerState = 1
	BreakerHalfOpen BreakerState = 2
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// Breaker is a per-upstream circuit breaker: failures failed attempts
// within window open it for openFor; then it half-opens and lets exactly one
// probe through; the probe's success closes it, its failure reopens it.
// Failures are counted in time buckets like the retry budget, so the cost is
// O(1) and nothing allocates.
type Breaker struct {
	threshold int64
	openFor   int64
	bucketNs  int64

	mu    sync.Mutex
	state BreakerState
	// open mirrors state != BreakerClosed (written under mu): Allow reads
	// it without the lock, which every attempt of every event loop would
	// otherwise take while the breaker is closed (nearly always).
	open     atomic.Bool
	until    int64 // end of the open period
	probing  bool  // a half-open probe is in flight
	head     int64
	buckets  [budgetBuckets]int64
	failures int64
}

// NewBreaker makes a breaker; failures <= 0 disables it (always closed).
func NewBreaker(failures int, window, openFor time.Duration) *Breaker {
	if window <= 0 {
		window = time.Second
	}
	bn := int64(window) / budgetBuckets
	if bn < 1 {
		bn = 1
	}
	return &Breaker{threshold: int64(failures), openFor: int64(openFor), bucketNs: bn}
}

func (b *Breaker) advance(now int64) int {
	idx := now / b.bucketNs
	if idx > b.head {
		steps := idx - b.head
		if steps > budgetBuckets {
			steps = budgetBuckets
		}
		for i := int64(1); i <= steps; i++ {
			j := (b.head + i) % budgetBuckets
			b.failures -= b.buckets[j]
			b.buckets[j] = 0
		}
		b.head = idx
	}
	return int(b.head % budgetBuckets)
}

// Allow reports whether an attempt may go out now. probe is true when the
// attempt is the single half-open probe; the caller must then report its
// outcome with Success or Failure (every allowed attempt should).
func (b *Breaker) Allow(now int64) (ok, probe bool) {
	if b.threshold <= 0 || !b.open.Load() {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if now < b.until {
			return false, false
		}
		b.state = BreakerHalfOpen
		b.open.Store(true)
		b.probing = false
	}
	if b.probing {
		return false, false
	}
	b.probing = true
	return true, true
}

// Closed reports whether the breaker is closed (retries are only made then).
func (b *Breaker) Closed(now int64) bool {
	if b.threshold <= 0 {
		return true
	}
	b.mu.Lock()
	s := b.state
	b.mu.Unlock()
	return s == BreakerClosed
}

// Success records a successful attempt.
func (b *Breaker) Success(now int64, probe bool) {
	// Only a half-open probe's success changes anything.
	if b.threshold <= 0 || !probe {
		return
	}
	b.mu.Lock()
	if b.state == BreakerHalfOpen && probe {
		b.state = BreakerClosed
		b.open.Store(false)
		b.probing = false
		b.failures = 0
		b.buckets = [budgetBuckets]int64{}
	}
	b.mu.Unlock()
}

// Cancel records an attempt that ended with no outcome for the upstream
// (its client went away): nothing is counted, and a half-open probe's
// place is given back, so that the next attempt probes instead of the
// breaker staying half-open with nobody probing.
func (b *Breaker) Cancel(probe bool) {
	if b.threshold <= 0 || !probe {
		return
	}
	b.mu.Lock()
	if b.state == BreakerHalfOpen {
		b.probing = false
	}
	b.mu.Unlock()
}

// Failure records a failed attempt and opens the breaker at the threshold.
func (b *Breaker) Failure(now int64, probe bool) {
	if b.threshold <= 0 {
		return
	}
	b.mu.Lock()
	switch b.state {
	case BreakerHalfOpen:
		if probe {
			b.state = BreakerOpen
			b.open.Store(true)
			b.until = now + b.openFor
			b.probing = false
		}
	case BreakerClosed:
		i := b.advance(now)
		b.buckets[i]++
		b.failures++
		if b.failures >= b.threshold {
			b.state = BreakerOpen
			b.open.Store(true)
			b.until = now + b.openFor
			b.failures = 0
			b.buckets = [budgetBuckets]int64{}
		}
	}
	b.mu.Unlock()
}

// State returns the current state, moving open to half-open once openFor
// has passed (as Allow would).
func (b *Breaker) State(now int64) BreakerState {
	if b.threshold <= 0 {
		return BreakerClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerOpen && now >= b.until {
		return BreakerHalfOpen
	}
	return b.state
}
