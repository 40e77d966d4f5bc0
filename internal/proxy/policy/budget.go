package policy

import (
	"sync"
	"time"
)

// budgetBuckets is how many time buckets a window is cut into: the window
// slides in steps of window/budgetBuckets, which is precise enough for a
// budget and keeps every operation O(1).
const budgetBuckets = 10

// RetryBudget limits retries to max(minPerSecond x window, percent % of the
// requests seen in the window), with Finagle/Linkerd semantics: every
// original request deposits, every retry withdraws.
//
// State is a ring of time buckets plus running totals under a short mutex
// that is never held across I/O; no operation allocates.
type RetryBudget struct {
	percent  int64
	floor    int64 // minPerSecond x window, in retries
	bucketNs int64

	mu       sync.Mutex
	head     int64 // index (time/bucketNs) of the newest bucket
	requests [budgetBuckets]int64
	retries  [budgetBuckets]int64
	totalReq int64
	totalRet int64
}

// NewRetryBudget makes a budget. window <= 0 is treated as 1s.
func NewRetryBudget(percent, minPerSecond int, window time.Duration) *RetryBudget {
	if window <= 0 {
		window = time.Second
	}
	bn := int64(window) / budgetBuckets
	if bn < 1 {
		bn = 1
	}
	return &RetryBudget{
		percent:  int64(percent),
		floor:    int64(minPerSecond) * int64(window) / int64(time.Second),
		bucketNs: bn,
	}
}

// advance drops buckets that fell out of the window; called with mu held.
func (b *RetryBudget) advance(now int64) int {
	idx := now / b.bucketNs
	if idx > b.head {
		steps := idx - b.head
		if steps > budgetBuckets {
			steps = budgetBuckets
		}
		for i := int64(1); i <= steps; i++ {
			j := (b.head + i) % budgetBuckets
			b.totalReq -= b.requests[j]
			b.totalRet -= b.retries[j]
			b.requests[j] = 0
			b.retries[j] = 0
		}
		b.head = idx
	}
	return int(b.head % budgetBuckets)
}

// Deposit records one original request at time now (unix nanoseconds).
func (b *RetryBudget) Deposit(now int64) {
	b.mu.Lock()
	i := b.advance(now)
	b.requests[i]++
	b.totalReq++
	b.mu.Unlock()
}

func (b *RetryBudget) allowed() int64 {
	a := b.totalReq * b.percent / 100
	if a < b.floor {
		a = b.floor
	}
	return a
}

// TryWithdraw takes one retry from the budget if there is room.
func (b *RetryBudget) TryWithdraw(now int64) bool {
	b.mu.Lock()
	i := b.advance(now)
	ok := b.totalRet < b.allowed()
	if ok {
		b.retries[i]++
		b.totalRet++
	}
	b.mu.Unlock()
	return ok
}

// Available is how many retries the budget would grant now (for metrics).
func (b *RetryBudget) Available(now int64) int64 {
	b.mu.Lock()
	b.advance(now)
	a := b.allowed() - b.totalRet
	b.mu.Unlock()
	if a < 0 {
		a = 0
	}
	return a
}
