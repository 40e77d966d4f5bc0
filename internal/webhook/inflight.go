package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// MaxInFlightBodyBytes bounds the bytes of admission requests the webhooks decode and judge at
// once. controller-runtime bounds one request's body (7 MiB) but not how many are served
// together, and judging one costs far more than its size: a 2 MB VirtualService of 10,000 routes
// allocates 216 MB under Rewrite (78 MB under Reject), so a few 3 MiB objects applied at once
// would take the manager past its 512Mi limit. A request waits for its share (FIFO) until the
// API server's timeout for the call ends; one larger than the budget waits for all of it and is served
// alone. Small requests (a Deployment, a few KB) are hardly held.
const MaxInFlightBodyBytes = 4 << 20

// defaultAdmissionTimeout is the API server's webhook timeout when none is given (timeoutSeconds).
const defaultAdmissionTimeout = 10 * time.Second

// bodyBudget holds admission requests over its budget of body bytes in flight.
type bodyBudget struct {
	sem *semaphore.Weighted
	max int64
	// waiting counts the requests held for their share (for the tests, which wait on it).
	waiting atomic.Int64
}

func newBodyBudget(max int64) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(max), max: max}
}

// weight is a request's share: its Content-Length (the server reads no more of the body), the
// whole budget when it is unknown (chunked) or larger.
func (b *bodyBudget) weight(r *http.Request) int64 {
	n := r.ContentLength
	if n < 0 || n > b.max {
		return b.max
	}
	return max(n, 1)
}

// wrap serves h within the budget.
func (b *bodyBudget) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.weight(r)
		// A caller that gives up is not seen while its body is unread (the server notices a
		// closed connection only once it reads): wait no longer than the API server does, by
		// the timeout it puts on the call's URL ("?timeout=10s"), 10 s when none.
		wait := defaultAdmissionTimeout
		if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
			wait = d
		}
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		b.waiting.Add(1)
		err := b.sem.Acquire(ctx, n)
		b.waiting.Add(-1)
		if err != nil {
			http.Error(w, fmt.Sprintf("retrycap webhook: a request of %d bytes not judged: it waited %s for its share of the %d bytes of admission requests judged at once",
				r.ContentLength, wait, b.max), http.StatusServiceUnavailable)
			return
		}
		defer b.sem.Release(n)
		h.ServeHTTP(w, r)
	})
}
