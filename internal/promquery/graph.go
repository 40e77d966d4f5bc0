package promquery

import (
	"context"
	"sort"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/telemetry"
)

// Graph runs telemetry.Queries at now over the client's window and reads their answers into
// the observed graph. Any error (the connection, an auth failure, a timeout, a query at the
// series limit, a series that is not a count or is given twice) fails the whole call, naming
// the query or the series: an observation missing a source would make its edges look stale.
// Each answer's series are checked once, as decoded (telemetry.CheckVector), and handed to
// telemetry.Read as checked.
func (c *Client) Graph(ctx context.Context, now time.Time, gateways []string) (*telemetry.Observation, error) {
	qs := telemetry.QueriesWith(c.opts.Window, c.opts.CallerLabel, c.opts.ReplicaLabels, c.opts.ClusterLabels)
	answers := make([]telemetry.Answer, 0, len(qs))
	for _, q := range qs {
		checked, err := c.queryChecked(ctx, q.PromQL, now)
		if err != nil {
			return nil, err
		}
		// Checked once here, as decoded: Read does not check the series again.
		answers = append(answers, telemetry.CheckedAnswer(q, checked))
	}
	ob, err := telemetry.Read(answers, telemetry.Options{Window: c.opts.Window, Gateways: gateways, CallerLabel: c.opts.CallerLabel, IstioCluster: c.opts.IstioCluster, ReplicaLabels: c.opts.ReplicaLabels,
		ClusterLabels: c.opts.ClusterLabels, Cluster: c.opts.Cluster})
	if err != nil || len(ob.Sources) > 0 {
		return ob, err
	}
	// No query answered a series: either none exists, or the window holds fewer than two
	// samples of each (increase() answers none then). One more query tells which.
	q := telemetry.PresenceQuery()
	v, err := c.query(ctx, q, now)
	if err != nil {
		return nil, err
	}
	ob.PresentOnly = []string{}
	for _, s := range v {
		ob.PresentOnly = append(ob.PresentOnly, string(s.Metric[model.MetricNameLabel]))
	}
	sort.Strings(ob.PresentOnly)
	if len(ob.PresentOnly) == 0 {
		ob.PresentOnly = nil
	}
	return ob, nil
}
