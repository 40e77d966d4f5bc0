package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// metrics holds the proxy's Prometheus collectors in its own registry, so
// several proxies can live in one process (tests, the storm lab).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	attempts *prometheus.CounterVec
	retries  *prometheus.CounterVec
	denied   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	tunnels  *prometheus.CounterVec
	handoffs *prometheus.CounterVec
	// loopPanics counts panics an event loop contained (each a bug).
	loopPanics prometheus.Counter
	// inFlight is read by a GaugeFunc at scrape time: one atomic add per
	// request instead of a Gauge's compare-and-swap loop on a float.
	inFlight atomic.Int64
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
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
	m.tunnels = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_tunnels_total", Help: "CONNECT and upgrade tunnels opened (never retried).",
	}, []string{"kind"})
	m.handoffs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "retrycap_proxy_loop_handoffs_total",
		Help: "Connections the event loops handed to the goroutine engine, by what they could not serve themselves.",
	}, []string{"reason"})
	m.loopPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retrycap_proxy_loop_panics_total",
		Help: "Panics an event loop contained by closing the connection concerned (each one is a bug: please report it with the log line).",
	})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "retrycap_proxy_in_flight", Help: "Calls being handled.",
	}, func() float64 { return float64(m.inFlight.Load()) })
	m.reg.MustRegister(m.requests, m.attempts, m.retries, m.denied, m.latency, m.tunnels, m.handoffs, m.loopPanics, inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// upMetrics are one upstream's children, resolved once so the data path
// never hashes label values.
type upMetrics struct {
	name     string
	parent   *metrics
	attempts prometheus.Counter
	retries  prometheus.Counter
	latency  prometheus.Observer
	denied   [policy.NumReasons]prometheus.Counter

	codeMu sync.Mutex
	codes  [600]atomic.Pointer[counterBox]
}

type counterBox struct{ c prometheus.Counter }

func (m *metrics) forUpstream(name string, budget *policy.RetryBudget, br *policy.Breaker) *upMetrics {
	u := &upMetrics{
		name: name, parent: m,
		attempts: m.attempts.WithLabelValues(name),
		retries:  m.retries.WithLabelValues(name),
		latency:  m.latency.WithLabelValues(name),
	}
	for r := policy.Reason(1); r < policy.NumReasons; r++ {
		u.denied[r] = m.denied.WithLabelValues(name, r.String())
	}
	if budget != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "retrycap_proxy_retry_budget_available", Help: "Retries the budget would grant now.",
			ConstLabels: prometheus.Labels{"upstream": name},
		}, func() float64 { return float64(budget.Available(nowNanos())) }))
	}
	if br != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "retrycap_proxy_breaker_state", Help: "Circuit breaker state: 0 closed, 1 open, 2 half-open.",
			ConstLabels: prometheus.Labels{"upstream": name},
		}, func() float64 { return float64(br.State(nowNanos())) }))
	}
	return u
}

// code counts one call's final status; children are created once per code.
func (u *upMetrics) code(status int) {
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
		b = &counterBox{c: u.parent.requests.WithLabelValues(u.name, strconv.Itoa(status))}
		u.codes[status].Store(b)
	}
	u.codeMu.Unlock()
	b.c.Inc()
}
