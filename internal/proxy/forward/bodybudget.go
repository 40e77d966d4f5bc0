package forward

import (
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// BodyBudget bounds the request body bytes the HTTP/1.1 engines hold in
// memory at once, proxy-wide (--max-buffered-body-bytes): each engine
// reserves a body's bytes as it buffers them and releases them when the
// request's buffer is freed. A reservation that does not fit is refused
// (the request gets BudgetAnswer, nothing is sent upstream).
type BodyBudget struct {
	max   int64
	inUse atomic.Int64
	// Refused counts the requests refused (retrycap_proxy_body_budget_refused_total).
	refused atomic.Int64
	// pending are bytes of buffers dropped (ReleaseFreed) not yet
	// collected; collecting: a goroutine runs the collection that frees
	// them.
	pending    atomic.Int64
	collecting atomic.Bool
}

// gcReleaseMin: a dropped buffer this large is released only once it is
// collected (ReleaseFreed); a smaller one at once.
const gcReleaseMin = 1 << 20

// NewBodyBudget is a budget of max bytes.
func NewBodyBudget(max int64) *BodyBudget { return &BodyBudget{max: max} }

// Max is the budget's size in bytes.
func (b *BodyBudget) Max() int64 { return b.max }

// InUse is how many bytes are reserved now.
func (b *BodyBudget) InUse() int64 { return b.inUse.Load() }

// Refused is how many requests the budget refused.
func (b *BodyBudget) Refused() int64 { return b.refused.Load() }

// Reserve takes n more bytes, or none and returns false (the bytes in use
// at the time, for the refusal's words) when they do not fit.
func (b *BodyBudget) Reserve(n int64) (ok bool, inUse int64) {
	for {
		cur := b.inUse.Load()
		if cur+n > b.max {
			return false, cur
		}
		if b.inUse.CompareAndSwap(cur, cur+n) {
			return true, cur + n
		}
	}
}

// Release gives back n bytes reserved before.
func (b *BodyBudget) Release(n int64) {
	if n != 0 {
		b.inUse.Add(-n)
	}
}

// ReleaseFreed releases n bytes of a buffer just dropped: a large one (at
// least gcReleaseMin) after the garbage collection that frees it, which a
// goroutine of the budget's runs at once (one at a time, for every buffer
// dropped meanwhile). Released at once, the bytes went to the next body
// while the dropped buffer still took memory: eight concurrent 15 MiB
// chunked uploads, seven refused, peaked at 72 MiB RSS (the limit: 64Mi).
func (b *BodyBudget) ReleaseFreed(n int64) {
	if n < gcReleaseMin {
		b.Release(n)
		return
	}
	b.pending.Add(n)
	if b.collecting.CompareAndSwap(false, true) {
		go b.collect()
	}
}

func (b *BodyBudget) collect() {
	for {
		p := b.pending.Swap(0)
		if p == 0 {
			b.collecting.Store(false)
			// A ReleaseFreed between the Swap and the Store found it
			// collecting: go on for it, unless another goroutine took over.
			if b.pending.Load() == 0 || !b.collecting.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		runtime.GC()
		b.Release(p)
	}
}

// RefusedBody counts a refusal and words it: a body of size bytes (its
// Content-Length, or what of a chunked one was read with the chunk that did
// not fit) did not fit beside inUse bytes.
func (b *BodyBudget) RefusedBody(size, inUse int64) string {
	b.refused.Add(1)
	return BudgetBody(size, inUse, b.max)
}

// BudgetBody is the body of the 503 to a request whose body did not fit.
func BudgetBody(size, inUse, max int64) string {
	return "retrycap-proxy: request body of " + strconv.FormatInt(size, 10) + " bytes refused: " +
		strconv.FormatInt(inUse, 10) + " of the proxy's " + strconv.FormatInt(max, 10) +
		" buffered-body bytes (--max-buffered-body-bytes) are in use\n"
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

// registerBodyBudget exports b: retrycap_proxy_buffered_body_bytes (in use)
// and retrycap_proxy_body_budget_refused_total.
func (m *Metrics) registerBodyBudget(b *BodyBudget) {
	m.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "retrycap_proxy_buffered_body_bytes",
		Help: "Request body bytes the HTTP/1.1 engines hold in memory now (reserved against --max-buffered-body-bytes).",
	}, func() float64 { return float64(b.InUse()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "retrycap_proxy_body_budget_refused_total",
		Help: "Requests answered 503 (not sent upstream) because their body did not fit in --max-buffered-body-bytes beside the bodies held.",
	}, func() float64 { return float64(b.Refused()) }))
}

// ErrBodyBudget is the access log's error of a request refused for the body
// budget: its line has attempt 0 (nothing was sent) and status 503.
const ErrBodyBudget = "body-budget"

// LogBudgetRefusal writes the access-log line of a request whose body did
// not fit in the budget (h: its head; r: an event loop's ring, nil for the
// shared one), if the log is on.
func (f *Forwarder) LogBudgetRefusal(h *fasthttp.RequestHeader, r *accesslog.Ring) {
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
	rec.Upstream, rec.Attempt, rec.Status, rec.GRPCStatus = name, 0, fasthttp.StatusServiceUnavailable, -1
	rec.BudgetIn, rec.BudgetOut = -1, -1
	rec.Exhausted, rec.Error = "", ErrBodyBudget
	rec.SetMethod(h.Method())
	rec.SetAuthority(h.Host())
	rec.SetPath(h.RequestURI())
	w.Commit(e)
}
