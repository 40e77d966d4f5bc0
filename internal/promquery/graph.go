package promquery

import (
	"context"
	"time"

	"github.com/retrycap/retrycap/internal/telemetry"
)

// Graph runs telemetry.Queries at now over the client's window and reads their answers into
// the observed graph. Any error (the connection, an auth failure, a timeout, a query at the
// series limit, answers telemetry.Read refuses) fails the whole call, naming the query or the
// series: an observation missing a source would make its edges look stale.
func (c *Client) Graph(ctx context.Context, now time.Time, gateways []string) (*telemetry.Observation, error) {
	qs := telemetry.Queries(c.opts.Window, c.opts.CallerLabel)
	answers := make([]telemetry.Answer, 0, len(qs))
	for _, q := range qs {
		v, err := c.query(ctx, q.PromQL, now)
		if err != nil {
			return nil, err
		}
		answers = append(answers, telemetry.Answer{Query: q, Vector: v})
	}
	return telemetry.Read(answers, telemetry.Options{Window: c.opts.Window, Gateways: gateways, CallerLabel: c.opts.CallerLabel})
}
