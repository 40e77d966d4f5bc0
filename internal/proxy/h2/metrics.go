package h2

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// metrics are the h2c path's series: the HTTP/1.1 ones with a protocol
// label (grpc: a gRPC call, judged and counted by its gRPC code, UNAVAILABLE;
// h2: any other HTTP/2 request, counted by its HTTP status).
type metrics struct {
	requests *prometheus.CounterVec
	attempts *prometheus.CounterVec
	retries  *prometheus.CounterVec
	resent   *prometheus.CounterVec
	denied   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	conns    *prometheus.CounterVec
	closed   *prometheus.CounterVec
	idle     *prometheus.CounterVec
	cut      *prometheus.CounterVec // Config.ResponsesCut, nil: none
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_requests_total",
			Help: "HTTP/2 calls through the proxy by upstream, protocol (grpc or h2) and the code returned to the app (the gRPC code name for grpc, the HTTP status for h2).",
		}, []string{"upstream", "protocol", "code"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_attempts_total", Help: "HTTP/2 attempts sent to each upstream (first tries and retries).",
		}, []string{"upstream", "protocol"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_retries_total", Help: "HTTP/2 retries sent to each upstream.",
		}, []string{"upstream", "protocol"}),
		resent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_resent_total",
			Help: "Streams re-sent on a new upstream connection because the upstream never processed them (GOAWAY below their id, REFUSED_STREAM): not attempts.",
		}, []string{"upstream", "protocol"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_retries_denied_total", Help: "HTTP/2 retryable failures not retried, by reason.",
		}, []string{"upstream", "protocol", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "retrycap_proxy_h2_upstream_latency_seconds", Help: "Latency of one HTTP/2 attempt up to its response headers.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"upstream", "protocol"}),
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_connections_total",
			Help: "Client connections whose h2c the proxy terminated, by how they came (connect: in a CONNECT tunnel; prior-knowledge: on the listener).",
		}, []string{"kind"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_connections_refused_total",
			Help: "Client connections the proxy ended for what the client did, by reason: rapid-reset (GOAWAY ENHANCE_YOUR_CALM), settings-flood (SETTINGS_INITIAL_WINDOW_SIZE changed more than 100 times within a second: GOAWAY ENHANCE_YOUR_CALM), frame-size (GOAWAY FRAME_SIZE_ERROR), timeout (preface, SETTINGS or a frame not whole within --http-request-timeout), not-reading (its writes pending past the bound, or a write not done within the write timeout).",
		}, []string{"reason"}),
		idle: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrycap_proxy_h2_stream_idle_timeouts_total",
			Help: "HTTP/2 streams the proxy ended because no frame of the call came from the client or the upstream for --stream-idle-timeout.",
		}, []string{"upstream", "protocol"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.attempts, m.retries, m.resent, m.denied, m.latency, m.conns, m.closed, m.idle} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// upMetrics are one upstream's and protocol's children, resolved once.
type upMetrics struct {
	attempts prometheus.Counter
	retries  prometheus.Counter
	resent   prometheus.Counter
	idle     prometheus.Counter
	latency  prometheus.Observer
	denied   [policy.NumReasons]prometheus.Counter
	// cutBy counts the answers passed on and cut, by cutIndex (nil
	// without Config.ResponsesCut).
	cutBy    [3]prometheus.Counter
	requests *prometheus.CounterVec
	name     string
	proto    string
	codes    sync.Map // code label -> prometheus.Counter, resolved once
}

func (m *metrics) forUpstream(name, proto string) *upMetrics {
	u := &upMetrics{
		attempts: m.attempts.WithLabelValues(name, proto),
		retries:  m.retries.WithLabelValues(name, proto),
		resent:   m.resent.WithLabelValues(name, proto),
		idle:     m.idle.WithLabelValues(name, proto),
		latency:  m.latency.WithLabelValues(name, proto),
		requests: m.requests, name: name, proto: proto,
	}
	for r := policy.Reason(1); r < policy.NumReasons; r++ {
		u.denied[r] = m.denied.WithLabelValues(name, proto, r.String())
	}
	if m.cut != nil {
		for i, by := range cutNames {
			u.cutBy[i] = m.cut.WithLabelValues(name, by)
		}
	}
	return u
}

// cutNames are who may cut an answer, in cutBy's order.
var cutNames = [3]string{accesslog.CutUpstream, accesslog.CutClient, accesslog.CutProxy}

// countCut counts an answer passed on and cut by by (one of cutNames).
func (u *upMetrics) countCut(by string) {
	for i, n := range cutNames {
		if n == by && u.cutBy[i] != nil {
			u.cutBy[i].Inc()
		}
	}
}

func (u *upMetrics) code(c string) {
	if v, ok := u.codes.Load(c); ok {
		v.(prometheus.Counter).Inc()
		return
	}
	ctr := u.requests.WithLabelValues(u.name, u.proto, c)
	u.codes.Store(c, ctr)
	ctr.Inc()
}
