package promquery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/observed"
)

// Defaults of the manager's flags.
const (
	DefaultWindow      = 5 * time.Minute
	DefaultTimeout     = 10 * time.Second
	DefaultSeriesLimit = 10000
	DefaultCallerLabel = "service"
)

// Options configure a Client.
type Options struct {
	// URL is Prometheus' base URL (http://prometheus.monitoring:9090).
	URL string
	// Window is the range the counters' increase is taken over.
	Window time.Duration
	// Timeout bounds each query: the HTTP request and Prometheus' own evaluation.
	Timeout time.Duration
	// SeriesLimit is the most series one query may return; a query that reaches it is an
	// error (its edges would be incomplete), not a silent truncation.
	SeriesLimit uint64
	// CallerLabel is the label that names the calling service on the scraped series: the proxy
	// does not carry its --service in its metrics, so the scrape configuration has to add it
	// (docs/observe.md).
	CallerLabel string
}

// Client queries one Prometheus for the per-edge counters.
type Client struct {
	api  v1.API
	opts Options
}

// New checks the options and makes a client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus-url %q: want an http or https URL with a host", o.URL)
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SeriesLimit == 0 {
		o.SeriesLimit = DefaultSeriesLimit
	}
	if o.CallerLabel == "" {
		o.CallerLabel = DefaultCallerLabel
	}
	if !model.LegacyValidation.IsValidLabelName(o.CallerLabel) {
		return nil, fmt.Errorf("--prometheus-caller-label %q: not a Prometheus label name", o.CallerLabel)
	}
	// A client of its own: the HTTP timeout bounds a Prometheus that accepts and never answers
	// even if a caller passes a context without a deadline.
	c, err := api.NewClient(api.Config{Address: o.URL, Client: &http.Client{Timeout: o.Timeout}})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url %q: %w", o.URL, err)
	}
	return &Client{api: v1.NewAPI(c), opts: o}, nil
}

// URL is the Prometheus URL, for messages.
func (c *Client) URL() string { return c.opts.URL }

// Window is the query window.
func (c *Client) Window() time.Duration { return c.opts.Window }

// Queries are the PromQL queries Series runs, in order, for a window and a caller label:
// attempts and calls for retrycap-proxy's counters, then Envoy's total and retries.
func Queries(window time.Duration, caller string) []string {
	w := model.Duration(window).String()
	by := "namespace, " + caller
	return []string{
		fmt.Sprintf("sum by (%s, upstream) (increase(retrycap_proxy_attempts_total[%s]))", by, w),
		fmt.Sprintf("sum by (%s, upstream) (increase(retrycap_proxy_requests_total[%s]))", by, w),
		fmt.Sprintf(`sum by (%s, envoy_cluster_name) (increase(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[%s]))`, by, w),
		fmt.Sprintf(`sum by (%s, envoy_cluster_name) (increase(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[%s]))`, by, w),
	}
}

// Series runs the queries at now and joins their results into per-edge series. Any error (the
// connection, a timeout, a bad answer, a query at the series limit) fails the whole call: a
// partial set of edges would make a partial product look like the worst path.
func (c *Client) Series(ctx context.Context, now time.Time) ([]observed.Series, error) {
	qs := Queries(c.opts.Window, c.opts.CallerLabel)
	results := make([]model.Vector, len(qs))
	for i, q := range qs {
		v, err := c.query(ctx, q, now)
		if err != nil {
			return nil, err
		}
		results[i] = v
	}
	return Join(results[0], results[1], results[2], results[3], c.opts.CallerLabel), nil
}

func (c *Client) query(ctx context.Context, q string, now time.Time) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	val, _, _, err := c.api.Query(ctx, q, now, v1.WithTimeout(c.opts.Timeout), v1.WithLimit(c.opts.SeriesLimit))
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, unwrapURLError(err))
	}
	v, ok := val.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s: got a %s, want a vector", q, val.Type())
	}
	if uint64(len(v)) >= c.opts.SeriesLimit {
		return nil, fmt.Errorf("query %s: %d series, the limit (--prometheus-series-limit): the edges would be incomplete", q, len(v))
	}
	return v, nil
}

// unwrapURLError keeps the message short and stable: net/http's *url.Error repeats the method
// and the whole query URL, which the message has already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Join pairs the four vectors into series: retrycap-proxy's attempts with its calls per
// (namespace, caller, upstream), Envoy's totals with its retries per (namespace, caller,
// cluster); Envoy's calls are its totals minus its retries. A sample without a caller cannot be
// placed on the graph and is dropped, as is an Envoy cluster that is not an outbound service.
func Join(attempts, calls, envoyTotal, envoyRetry model.Vector, caller string) []observed.Series {
	type key struct{ ns, caller, upstream string }
	var order []key
	rc := map[key]*observed.Series{}
	get := func(k key, src string) *observed.Series {
		s := rc[k]
		if s == nil {
			s = &observed.Series{Source: src, Namespace: k.ns, Caller: k.caller, Upstream: k.upstream}
			rc[k] = s
			order = append(order, k)
		}
		return s
	}
	label := func(m model.Metric, name string) string { return string(m[model.LabelName(name)]) }
	for _, smp := range attempts {
		if k := (key{label(smp.Metric, "namespace"), label(smp.Metric, caller), label(smp.Metric, "upstream")}); k.caller != "" && k.upstream != "" {
			get(k, observed.SourceRetrycap).Attempts += float64(smp.Value)
		}
	}
	for _, smp := range calls {
		if k := (key{label(smp.Metric, "namespace"), label(smp.Metric, caller), label(smp.Metric, "upstream")}); k.caller != "" && k.upstream != "" {
			get(k, observed.SourceRetrycap).Calls += float64(smp.Value)
		}
	}
	out := make([]observed.Series, 0, len(order))
	for _, k := range order {
		out = append(out, *rc[k])
	}
	// Envoy: the same caller and namespace labels; the upstream from the cluster's name.
	order, rc = nil, map[key]*observed.Series{}
	total := map[key]float64{}
	retry := map[key]float64{}
	for _, vec := range []struct {
		v   model.Vector
		sum map[key]float64
	}{{envoyTotal, total}, {envoyRetry, retry}} {
		for _, smp := range vec.v {
			ns := label(smp.Metric, "namespace")
			up, ok := EnvoyUpstream(label(smp.Metric, "envoy_cluster_name"), ns)
			k := key{ns, label(smp.Metric, caller), up}
			if !ok || k.caller == "" {
				continue
			}
			if _, seen := total[k]; !seen {
				if _, seen := retry[k]; !seen {
					order = append(order, k)
				}
			}
			vec.sum[k] += float64(smp.Value)
		}
	}
	for _, k := range order {
		t, r := total[k], retry[k]
		out = append(out, observed.Series{Source: observed.SourceEnvoy, Namespace: k.ns, Caller: k.caller, Upstream: k.upstream, Attempts: t, Calls: t - r})
	}
	return out
}

// EnvoyUpstream maps an Istio outbound cluster name, "outbound|PORT|SUBSET|HOST", to the
// upstream's name as a caller in namespace ns names it: HOST "payment.shop.svc.cluster.local"
// is "payment" from shop and "payment.shop" from elsewhere. Other clusters (inbound, the
// passthrough and black-hole clusters, a host outside the cluster domain) are not services of
// the graph: ok false.
func EnvoyUpstream(cluster, ns string) (string, bool) {
	parts := strings.Split(cluster, "|")
	if len(parts) != 4 || parts[0] != "outbound" {
		return "", false
	}
	host := parts[3]
	for _, suffix := range []string{".svc.cluster.local", ".svc"} {
		if h, ok := strings.CutSuffix(host, suffix); ok {
			name, hostNS, ok := strings.Cut(h, ".")
			if !ok || name == "" || hostNS == "" || strings.Contains(hostNS, ".") {
				return "", false
			}
			if hostNS == ns {
				return name, true
			}
			return name + "." + hostNS, true
		}
	}
	return "", false
}
