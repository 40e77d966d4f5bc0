package promquery

import (
	"context"
	"time"

	"github.com/retrycap/retrycap/internal/telemetry"
)

// Graph runs telemetry.Queries at now over the client's window and reads their answers into
// the observed graph. Any error (the connection, an auth failure, a timeout, a query at the
// series limit, a series that is not a count or is given twice) fails the whole call, naming
// the query or the series: an observation missing a source would make its edges look stale.
// Each answer's series are checked once, as decoded (telemetry.CheckVector), and handed to
// telemetry.Read as checked.
func (c *Client) Graph(ctx context.Context, now time.Time, gateways []string) (*telemetry.Observation, error) {
	qs := telemetry.Queries(c.opts.Window, c.opts.CallerLabel)
	answers := make([]telemetry.Answer, 0, len(qs))
	for _, q := range qs {
		checked, err := c.queryChecked(ctx, q.PromQL, now)
		if err != nil {
			return nil, err
		}
		// Checked once here, as decoded: Read does not check the series again.
		answers = append(answers, telemetry.CheckedAnswer(q, checked))
	}
	return telemetry.Read(answers, telemetry.Options{Window: c.opts.Window, Gateways: gateways, CallerLabel: c.opts.CallerLabel})
}
