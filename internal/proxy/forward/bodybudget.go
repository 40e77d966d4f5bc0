package forward

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// BodyBudget bounds the request body bytes the HTTP/1.1 engines hold in
// memory at once, proxy-wide (--max-buffered-body-bytes): each engine
// reserves a body's bytes (its Hold) as it buffers them and releases them
// when the request's buffer is freed. A reservation that does not fit is
// refused (the request gets BudgetAnswer, nothing is sent upstream).
//
// Two rules keep a few large bodies from refusing everyone else:
//   - a sixteenth of the budget (SmallShare) is kept for small bodies,
//     those whose whole reservation stays within SmallBody: a large body
//     (or a growing one once past SmallBody) may hold at most Max less
//     that share, so large or slow uploads never refuse a small one while
//     the small share has room (a small body may use any byte free);
//   - a growing (chunked) body whose next step does not fit waits for room
//     (Grow), in the order the bodies began, instead of failing: refusing
//     every chunked upload that met another at a doubling refused them all.
//     When every byte held belongs to a waiting body and none is on its way
//     back, none can ever fit: the youngest waiter is refused (its bytes go
//     to the older), so the earliest bodies finish.
type BodyBudget struct {
	max, small int64 // the budget; the share kept for small bodies
	use        atomic.Int64
	refused    atomic.Int64
	gone       atomic.Int64

	mu      sync.Mutex
	inUse   int64 // bytes held (mirrored in use for the gauge)
	large   int64 // of them, by large bodies
	seq     uint64
	waiters []*bodyWait // oldest body first
	// waitHeld: bytes the waiting bodies hold.
	waitHeld int64
	// pending (of them pendingLarge by large bodies) are bytes of buffers
	// dropped (ReleaseFreed) not yet collected; collecting: a goroutine
	// runs the collection that frees them.
	pending, pendingLarge int64
	collecting            bool
}

// Hold is one body's reservation. Its fields are the budget's (read and
// written under its lock): an engine keeps a Hold per body and passes it.
type Hold struct {
	n     int64
	large bool
	seq   uint64 // the order bodies began in (0: none reserved yet)
	wait  *bodyWait
}

// bodyWait is a body waiting (Grow) for n more bytes.
type bodyWait struct {
	h    *Hold
	n    int64
	wake chan struct{} // closed when done
	done bool
	ok   bool
}

// SmallBody is the largest reservation of a small body: the event loop's
// own bodies (BufferedBodyMax), a JSON POST.
const SmallBody = BufferedBodyMax

// gcReleaseMin: a dropped buffer this large is released only once it is
// collected (ReleaseFreed); a smaller one at once.
const gcReleaseMin = 1 << 20

// NewBodyBudget is a budget of max bytes, a sixteenth of them kept for
// small bodies.
func NewBodyBudget(max int64) *BodyBudget { return &BodyBudget{max: max, small: max / 16} }

// Max is the budget's size in bytes.
func (b *BodyBudget) Max() int64 { return b.max }

// LargeMax is the most large bodies may hold together.
func (b *BodyBudget) LargeMax() int64 { return b.max - b.small }

// InUse is how many bytes are reserved now.
func (b *BodyBudget) InUse() int64 { return b.use.Load() }

// Refused is how many requests the budget refused.
func (b *BodyBudget) Refused() int64 { return b.refused.Load() }

// Gone is how many bodies' connections ended (the client's reset, the
// proxy's close) while they waited for room: nothing was answered to them,
// so they are no refusals.
func (b *BodyBudget) Gone() int64 { return b.gone.Load() }

// GoneWaiting counts a body whose wait (Grow) ended because its connection
// did (Gone).
func (b *BodyBudget) GoneWaiting() { b.gone.Add(1) }

// Waiting is how many bodies wait for room now.
func (b *BodyBudget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// fits: n more bytes for h fit; the bytes h moves to the large share when
// it grows past SmallBody count there whole. Called with mu held.
func (b *BodyBudget) fits(h *Hold, n int64) bool {
	if b.inUse+n > b.max {
		return false
	}
	if !h.large && h.n+n <= SmallBody {
		return true
	}
	add := n
	if !h.large {
		add += h.n
	}
	return b.large+add <= b.max-b.small
}

// never: n more bytes for h do not fit even with every other body gone
// (its own bytes stay held while it waits). Called with mu held.
func (b *BodyBudget) never(h *Hold, n int64) bool {
	if h.n+n > b.max {
		return true
	}
	return (h.large || h.n+n > SmallBody) && h.n+n > b.max-b.small
}

// admit: n more bytes for h fit now, without passing a waiting body (a
// small one may: it holds little, briefly). Called with mu held.
func (b *BodyBudget) admit(h *Hold, n int64) bool {
	return b.fits(h, n) && (len(b.waiters) == 0 || (!h.large && h.n+n <= SmallBody))
}

// take adds n bytes to h. Called with mu held.
func (b *BodyBudget) take(h *Hold, n int64) {
	if h.seq == 0 {
		b.seq++
		h.seq = b.seq
	}
	if !h.large && h.n+n > SmallBody {
		h.large = true
		b.large += h.n
	}
	if h.large {
		b.large += n
	}
	h.n += n
	b.inUse += n
	b.use.Store(b.inUse)
}

// Reserve takes n more bytes for h at once, or none and returns false (the
// bytes in use at the time, for the refusal's words) when they do not fit.
// A large body does not pass bodies waiting for room.
func (b *BodyBudget) Reserve(h *Hold, n int64) (ok bool, inUse int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.admit(h, n) {
		return false, b.inUse
	}
	b.take(h, n)
	return true, b.inUse
}

// Grow takes n more bytes for h (a body that grows as it is read), waiting
// for room in the order the bodies began, until deadline or done; false
// (the bytes in use then) when the wait ends without them: the deadline,
// done, or h chosen to make room for older bodies (see BodyBudget). A
// growth that could not fit even in a budget otherwise empty (more than
// large bodies may hold) does not wait: false at once.
func (b *BodyBudget) Grow(h *Hold, n int64, deadline time.Time, done <-chan struct{}) (ok bool, inUse int64) {
	b.mu.Lock()
	if b.admit(h, n) {
		b.take(h, n)
		inUse = b.inUse
		b.mu.Unlock()
		return true, inUse
	}
	if b.never(h, n) {
		// No wait: room for it never comes, and a waiter holds up every
		// large body behind it (admit).
		inUse = b.inUse
		b.mu.Unlock()
		return false, inUse
	}
	if h.seq == 0 {
		b.seq++
		h.seq = b.seq
	}
	w := &bodyWait{h: h, n: n, wake: make(chan struct{})}
	i := len(b.waiters)
	for i > 0 && b.waiters[i-1].h.seq > h.seq {
		i--
	}
	b.waiters = append(b.waiters, nil)
	copy(b.waiters[i+1:], b.waiters[i:])
	b.waiters[i] = w
	h.wait = w
	b.waitHeld += h.n
	b.settle()
	b.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-w.wake:
	case <-timer.C:
	case <-done:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !w.done {
		b.unwait(w, false)
		b.settle()
	}
	return w.ok, b.inUse
}

// unwait ends w's wait (ok: with its bytes taken). Called with mu held.
func (b *BodyBudget) unwait(w *bodyWait, ok bool) {
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.waitHeld -= w.h.n
	w.h.wait = nil
	if ok {
		b.take(w.h, w.n)
	}
	w.done, w.ok = true, ok
	close(w.wake)
}

// settle gives room to the waiting bodies, oldest first, and when none can
// ever have it (every byte held is a waiting body's, none on its way back)
// refuses the youngest. Called with mu held.
func (b *BodyBudget) settle() {
	for len(b.waiters) > 0 {
		granted := false
		for i, w := range b.waiters {
			if (i == 0 || (!w.h.large && w.h.n+w.n <= SmallBody)) && b.fits(w.h, w.n) {
				b.unwait(w, true)
				granted = true
				break
			}
		}
		if granted {
			continue
		}
		if b.inUse == b.waitHeld && b.pending == 0 {
			b.unwait(b.waiters[len(b.waiters)-1], false)
			continue
		}
		return
	}
}

// release gives back n of h's bytes now. Called with mu held.
func (b *BodyBudget) release(n int64, large bool) {
	if n == 0 {
		return
	}
	b.inUse -= n
	if large {
		b.large -= n
	}
	b.use.Store(b.inUse)
	b.settle()
}

// drop takes n of h's bytes off it (all if n >= its bytes), ending its wait
// if it waits. Called with mu held.
func (b *BodyBudget) drop(h *Hold, n int64) (int64, bool) {
	if h.wait != nil {
		b.unwait(h.wait, false)
	}
	n = min(n, h.n)
	h.n -= n
	large := h.large
	if h.n == 0 {
		h.large, h.seq = false, 0
	}
	return n, large
}

// Release gives back all of h's bytes now.
func (b *BodyBudget) Release(h *Hold) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(b.drop(h, h.n))
}

// ReleaseFreed releases all of h's bytes, a buffer just dropped: a large
// one (at least gcReleaseMin) after the garbage collection that frees it,
// which a goroutine of the budget's runs at once (one at a time, for every
// buffer dropped meanwhile). Released at once, the bytes went to the next
// body while the dropped buffer still took memory: eight concurrent 15 MiB
// chunked uploads, seven refused, peaked at 72 MiB RSS (the limit: 64Mi).
func (b *BodyBudget) ReleaseFreed(h *Hold) { b.ReleaseFreedPart(h, h.n) }

// ReleaseFreedPart is ReleaseFreed for n of h's bytes: a buffer of the body
// that it has outgrown (h goes on).
func (b *BodyBudget) ReleaseFreedPart(h *Hold, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, large := b.drop(h, n)
	if n < gcReleaseMin {
		b.release(n, large)
		return
	}
	b.pending += n
	if large {
		b.pendingLarge += n
	}
	if !b.collecting {
		b.collecting = true
		go b.collect()
	}
}

func (b *BodyBudget) collect() {
	for {
		b.mu.Lock()
		p, pl := b.pending, b.pendingLarge
		if p == 0 {
			b.collecting = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		runtime.GC()
		b.mu.Lock()
		// Only what was pending before the collection: a buffer dropped
		// during it may not be freed yet.
		b.pending -= p
		b.pendingLarge -= pl
		b.inUse -= p
		b.large -= pl
		b.use.Store(b.inUse)
		b.settle()
		b.mu.Unlock()
	}
}

// RefusedBody counts a refusal of h's body, want more bytes, and words
// it: size bytes (its Content-Length, or what of a chunked one was read
// with the chunk that did not fit) did not fit beside inUse bytes; a large
// body's words say what large bodies may hold.
func (b *BodyBudget) RefusedBody(h *Hold, want, size, inUse int64) string {
	b.refused.Add(1)
	b.mu.Lock()
	large := h.large || h.n+want > SmallBody
	b.mu.Unlock()
	if !large {
		return BudgetBody(size, inUse, b.max, 0)
	}
	return BudgetBody(size, inUse, b.max, b.max-b.small)
}

// BudgetBody is the body of the 503 to a request whose body did not fit;
// largeMax, when not 0, is what bodies over SmallBody may hold together.
func BudgetBody(size, inUse, max, largeMax int64) string {
	s := "retrycap-proxy: request body of " + strconv.FormatInt(size, 10) + " bytes refused: " +
		strconv.FormatInt(inUse, 10) + " of the proxy's " + strconv.FormatInt(max, 10) +
		" buffered-body bytes (--max-buffered-body-bytes) are in use"
	if largeMax != 0 {
		s += "; bodies over " + strconv.Itoa(SmallBody) + " bytes may hold " + strconv.FormatInt(largeMax, 10) +
			" (the rest is kept for smaller ones)"
	}
	return s + "\n"
}

// BudgetAnswer is the whole 503 with body (BudgetBody): the proxy's own
// answer (OwnAnswer's form) with Retry-After: 1 (the budget frees as the
// bodies in flight are answered) and Connection: close (the rest of the
// body is not read). SetBudgetAnswer writes the same bytes on the goroutine
// engine.
func BudgetAnswer(body string) []byte {
	return OwnAnswerRetryAfter(fasthttp.StatusServiceUnavailable, body, true)
}

// SetBudgetAnswer makes resp BudgetAnswer(body), as SetOwnAnswer does.
func SetBudgetAnswer(resp *fasthttp.Response, body string) {
	SetOwnAnswer(resp, fasthttp.StatusServiceUnavailable, body, true)
	resp.Header.Set(fasthttp.HeaderRetryAfter, "1")
}

// registerBodyBudget exports b: retrycap_proxy_buffered_body_bytes (in use),
// retrycap_proxy_body_budget_refused_total,
// retrycap_proxy_body_budget_gone_total and
// retrycap_proxy_body_budget_waiting.
func (m *Metrics) registerBodyBudget(b *BodyBudget) {
	m.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "retrycap_proxy_buffered_body_bytes",
		Help: "Request body bytes the HTTP/1.1 engines hold in memory now (reserved against --max-buffered-body-bytes).",
	}, func() float64 { return float64(b.InUse()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "retrycap_proxy_body_budget_refused_total",
		Help: "Requests answered 503 (not sent upstream) because their body did not fit in --max-buffered-body-bytes beside the bodies held.",
	}, func() float64 { return float64(b.Refused()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "retrycap_proxy_body_budget_gone_total",
		Help: "Chunked request bodies whose connection ended (the client's reset, the proxy's close) while they waited for room in --max-buffered-body-bytes: nothing answered, nothing sent upstream.",
	}, func() float64 { return float64(b.Gone()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "retrycap_proxy_body_budget_waiting",
		Help: "Chunked request bodies waiting for room in --max-buffered-body-bytes to grow (their reads paused).",
	}, func() float64 { return float64(b.Waiting()) }))
}

// ErrBodyBudget is the access log's error of a request refused for the body
// budget: its line has attempt 0 (nothing was sent) and status 503.
const ErrBodyBudget = "body-budget"

// ErrCancelled is the access log's error of a request whose client went
// away: here, one whose body waited for budget room when its connection
// ended (attempt 0, status 0: nothing was sent, nothing answered).
const ErrCancelled = "cancelled"

// LogBudgetRefusal writes the access-log line of a request whose body did
// not fit in the budget (h: its head; r: an event loop's ring, nil for the
// shared one), if the log is on.
func (f *Forwarder) LogBudgetRefusal(h *fasthttp.RequestHeader, r *accesslog.Ring) {
	f.logNoAttempt(h, r, fasthttp.StatusServiceUnavailable, ErrBodyBudget)
}

// LogBudgetGone writes the access-log line of a request whose connection
// ended while its body waited for budget room (BodyBudget.Gone): status 0,
// no answer was written.
func (f *Forwarder) LogBudgetGone(h *fasthttp.RequestHeader) {
	f.logNoAttempt(h, nil, 0, ErrCancelled)
}

// logNoAttempt writes the line (attempt 0) of a request that ended before
// any attempt, with status (0: none answered) and error.
func (f *Forwarder) logNoAttempt(h *fasthttp.RequestHeader, r *accesslog.Ring, status int, err string) {
	w := f.accessLog
	if w == nil {
		return
	}
	e := w.BeginOn(r)
	if e == nil {
		return // dropped, counted
	}
	name := f.Unknown.Name
	if up := f.Match(SplitHostPort(h.Host())); up != nil {
		name = up.Name
	}
	rec := &e.Record
	rec.TimeNanos, rec.DurationNanos = NowNanos(), 0
	rec.Upstream, rec.Attempt, rec.Status, rec.GRPCStatus = name, 0, status, -1
	rec.BudgetIn, rec.BudgetOut = -1, -1
	rec.Exhausted, rec.Error = "", err
	rec.SetMethod(h.Method())
	rec.SetAuthority(h.Host())
	rec.SetPath(h.RequestURI())
	w.Commit(e)
}
