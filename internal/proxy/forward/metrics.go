package forward

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Metrics holds the proxy's Prometheus collectors in its own registry, so
// several proxies can live in one process (tests, the storm lab). Both
// engines count into it.
type Metrics struct {
	Reg      *prometheus.Registry
	Requests *prometheus.CounterVec
	attempts *prometheus.CounterVec
	retries  *prometheus.CounterVec
	denied   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	cut      *prometheus.CounterVec
	// Tunnels counts CONNECT and upgrade tunnels by kind.
	Tunnels *prometheus.CounterVec
	// Handoffs counts what the event loops hand to the goroutine engine, by
	// reason (the loop's HandoffReason.String()).
	Handoffs *prometheus.CounterVec
	// LoopPanics counts panics an event loop contained (each a bug).
	LoopPanics prometheus.Counter
	// Timeouts counts client connections cut by a timeout, by kind
	// (TimeoutHTTPRequest, TimeoutClient, TimeoutKeepAlive).
	Timeouts *prometheus.CounterVec
	// StaleResends counts requests sent again after a reused connection
	// failed before any byte of an answer (the upstream had closed it):
	// on a fresh connection within the attempt when no byte of the request
	// had left (not an attempt), else as the next attempt (also counted in
	// attempts and retries). Neither is a breaker failure.
	StaleResends prometheus.Counter
	// AcceptPauses counts the pauses of accepting on descriptor exhaustion.
	AcceptPauses prometheus.Counter
	// InFlight is read by a GaugeFunc at scrape time: one atomic add per
	// request instead of a Gauge's compare-and-swap loop on a float.
	InFlight atomic.Int64
}

// NewMetrics creates the collectors in a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{Reg: prometheus.NewRegistry()}
	m.Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_requests_total", Help: "Calls through the proxy by upstream and the status code returned to the app.",
	}, []string{"upstream", "code"})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_attempts_total", Help: "Attempts sent to each upstream (first tries and retries).",
	}, []string{"upstream"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_retries_total", Help: "Retries sent to each upstream.",
	}, []string{"upstream"})
	m.denied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_retries_denied_total", Help: "Retryable failures not retried, by reason.",
	}, []string{"upstream", "reason"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "retrycap_proxy_upstream_latency_seconds", Help: "Latency of one attempt to the upstream.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"upstream"})
	m.cut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_responses_cut_total",
		Help: "Answers whose body was cut after the head went to the client (HTTP/1.1: chunked, or a length over 64 KiB; HTTP/2 and gRPC: any stream passed on), by who ended it: upstream (closed or reset its connection or the stream, stalled past the body's idle timeout or broke its framing), client (went away or reset the stream), proxy (could not stream it, a drain that ran out of time, a client not reading past the write timeout, a gRPC deadline). The access log's line says cut.",
	}, []string{"upstream", "by"})
	m.Tunnels = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_tunnels_total", Help: "CONNECT and upgrade tunnels opened (never retried).",
	}, []string{"kind"})
	m.Handoffs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_loop_handoffs_total",
		Help: "Connections the event loops handed to the goroutine engine, by what they could not serve themselves.",
	}, []string{"reason"})
	m.LoopPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retrycap_proxy_loop_panics_total",
		Help: "Panics an event loop contained by closing the connection concerned (each one is a bug: please report it with the log line).",
	})
	m.Timeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_timeouts_total",
		Help: "Client connections closed by a timeout, by kind: http-request (head not whole in time, 408), client (body not whole in time, 408), keep-alive (idle between requests).",
	}, []string{"kind"})
	for _, k := range []string{TimeoutHTTPRequest, TimeoutClient, TimeoutKeepAlive} {
		m.Timeouts.WithLabelValues(k)
	}
	m.StaleResends = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retrycap_proxy_stale_resends_total",
		Help: "Requests sent again because a reused upstream connection failed before any byte of an answer (the upstream had closed it idle): within the attempt when no byte of the request had left, else as the next attempt (counted in attempts and retries); never breaker failures.",
	})
	m.AcceptPauses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retrycap_proxy_accept_pauses_total",
		Help: "Pauses of accepting client connections because descriptors ran out (EMFILE/ENFILE); open connections are served meanwhile.",
	})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "retrycap_proxy_in_flight", Help: "Calls being handled.",
	}, func() float64 { return float64(m.InFlight.Load()) })
	m.Reg.MustRegister(m.Requests, m.attempts, m.retries, m.denied, m.latency, m.cut, m.Tunnels, m.Handoffs, m.LoopPanics, m.Timeouts, m.StaleResends, m.AcceptPauses, inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ResponsesCut is retrycap_proxy_responses_cut_total{upstream,by}: the h2 relay counts its
// streams cut after their answer's head into it too (h2.Config.ResponsesCut).
func (m *Metrics) ResponsesCut() *prometheus.CounterVec { return m.cut }

// UpMetrics are one upstream's children, resolved once so the data path
// never hashes label values.
type UpMetrics struct {
	name     string
	parent   *Metrics
	Attempts prometheus.Counter
	Retries  prometheus.Counter
	Latency  prometheus.Observer
	Denied   [policy.NumReasons]prometheus.Counter
	// CutByUpstream, CutByClient and CutByProxy count the streamed answers cut after their
	// head was judged (StreamEnd).
	CutByUpstream, CutByClient, CutByProxy prometheus.Counter

	codeMu sync.Mutex
	codes  [600]atomic.Pointer[counterBox]
}

type counterBox struct{ c prometheus.Counter }

func (m *Metrics) forUpstream(name string, budget *policy.RetryBudget, br *policy.Breaker) *UpMetrics {
	u := &UpMetrics{
		name: name, parent: m,
		Attempts: m.attempts.WithLabelValues(name),
		Retries:  m.retries.WithLabelValues(name),
		Latency:  m.latency.WithLabelValues(name),

		CutByUpstream: m.cut.WithLabelValues(name, CutUpstream),
		CutByClient:   m.cut.WithLabelValues(name, CutClient),
		CutByProxy:    m.cut.WithLabelValues(name, CutProxy),
	}
	for r := policy.Reason(1); r < policy.NumReasons; r++ {
		u.Denied[r] = m.denied.WithLabelValues(name, r.String())
	}
	if budget != nil {
		m.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "retrycap_proxy_retry_budget_available", Help: "Retries the budget would grant now.",
			ConstLabels: prometheus.Labels{"upstream": name},
		}, func() float64 { return float64(budget.Available(NowNanos())) }))
	}
	if br != nil {
		m.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "retrycap_proxy_breaker_state", Help: "Circuit breaker state: 0 closed, 1 open, 2 half-open.",
			ConstLabels: prometheus.Labels{"upstream": name},
		}, func() float64 { return float64(br.State(NowNanos())) }))
	}
	return u
}

// Code counts one call's final status; children are created once per code.
func (u *UpMetrics) Code(status int) {
	if status < 0 || status >= len(u.codes) {
		status = 0
	}
	if b := u.codes[status].Load(); b != nil {
		b.c.Inc()
		return
	}
	u.codeMu.Lock()
	b := u.codes[status].Load()
	if b == nil {
		b = &counterBox{c: u.parent.Requests.WithLabelValues(u.name, strconv.Itoa(status))}
		u.codes[status].Store(b)
	}
	u.codeMu.Unlock()
	b.c.Inc()
}
