package operator

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/internal/controller"
	"github.com/retrycap/retrycap/internal/promquery"
)

// DefaultPrometheusInterval is how often the manager queries Prometheus with --prometheus-url.
const DefaultPrometheusInterval = time.Minute

// Prometheus are the --prometheus-* options: the observed amplification (docs/observe.md).
type Prometheus struct {
	// URL is Prometheus' base URL; empty: off (no field, no condition, no query).
	URL string
	// Interval is how often it is queried; Window the range of the counters' increase;
	// Timeout bounds one query; SeriesLimit the series one query may return; CallerLabel the
	// label that names the calling service on the proxies' series.
	Interval, Window, Timeout time.Duration
	SeriesLimit               uint64
	CallerLabel               string
	// Auth are the credentials and CA Prometheus is queried with (--prometheus-bearer-token-file,
	// --prometheus-username, --prometheus-password-file, --prometheus-ca-file).
	Auth promquery.Auth
	// MaxAnswerBytes bounds one answer (--prometheus-max-answer-size); 0: the default, 64 MiB.
	MaxAnswerBytes int64
	// ReplicaLabels tell an HA pair's replicas apart (--prometheus-replica-label); nil: the
	// default, prometheus_replica.
	ReplicaLabels []string
	// IstioCluster is the Istio cluster whose series the graph reads when Prometheus holds
	// several (--prometheus-istio-cluster); "" refuses several.
	IstioCluster string
	// ClusterLabels name a series' cluster (--prometheus-cluster-label; nil: cluster), Cluster
	// the one whose series both reads take when Prometheus holds several (--prometheus-cluster);
	// "" refuses several.
	ClusterLabels []string
	Cluster       string
}

// validate checks the options without starting anything.
func (p Prometheus) validate() error {
	if p.URL == "" {
		return nil
	}
	if _, err := p.client(); err != nil {
		return err
	}
	if p.Interval < 0 {
		return fmt.Errorf("--prometheus-interval %s: must be positive", p.Interval)
	}
	// Under a second the poller would query without a pause.
	if p.Interval > 0 && p.Interval < time.Second {
		return fmt.Errorf("--prometheus-interval %s: want at least 1s", p.Interval)
	}
	// promquery reads a negative window or timeout as its default: said instead.
	if p.Window < 0 {
		return fmt.Errorf("--prometheus-window %s: must be positive", p.Window)
	}
	// The range is written in Prometheus' duration syntax: under 1s it reads [0s] (refused by
	// Prometheus); whole seconds as discover's --since.
	if p.Window > 0 && (p.Window < time.Second || p.Window%time.Second != 0) {
		return fmt.Errorf("--prometheus-window %s: want whole seconds, at least 1s", p.Window)
	}
	if p.Timeout < 0 {
		return fmt.Errorf("--prometheus-timeout %s: must be positive", p.Timeout)
	}
	return nil
}

func (p Prometheus) client() (*promquery.Client, error) {
	return promquery.New(promquery.Options{URL: p.URL, Window: p.Window, Timeout: p.Timeout, SeriesLimit: p.SeriesLimit, CallerLabel: p.CallerLabel, Auth: p.Auth, MaxAnswerBytes: p.MaxAnswerBytes, IstioCluster: p.IstioCluster, ReplicaLabels: p.ReplicaLabels,
		ClusterLabels: p.ClusterLabels, Cluster: p.Cluster})
}

// newObserver adds the Prometheus poller to the manager; nil without --prometheus-url.
func newObserver(mgr ctrl.Manager, p Prometheus) (*controller.Observer, error) {
	if p.URL == "" {
		return nil, nil
	}
	c, err := p.client()
	if err != nil {
		return nil, err
	}
	o := &controller.Observer{Query: c, Interval: orDefault(p.Interval, DefaultPrometheusInterval)}
	if err := mgr.Add(o); err != nil {
		return nil, fmt.Errorf("adding the Prometheus poller: %w", err)
	}
	return o, nil
}
