package demo

import (
	"context"
	"fmt"

	"github.com/retrycap/retrycap/internal/storm"
)

// stormLab runs the lab: real proxies and apps on loopback, naive retries against retrycap under
// the same outage, by default a hung payment (storm.Defaults). The full lab takes about 2
// minutes; Short takes about 45 s.
func stormLab(ctx context.Context, d *run) error {
	o := storm.Defaults()
	length := "about 2 minutes"
	if d.opts.Short {
		o = storm.Short()
		length = "about 45 s, short mode"
	}
	d.step(fmt.Sprintf("The storm lab: payment hangs under load (it reads requests and answers none); naive retries against retrycap: requests at payment, the user's wait, work for users who left (real processes on loopback, %s)", length))
	// A path the caller chose (make demo: bin/storm.svg), not a new temporary directory per
	// run: those were left behind, one per run.
	o.Out = d.out
	o.ChartPath = d.opts.ChartPath
	res, err := storm.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("the storm lab: %w", err)
	}
	if err := res.WriteSummary(d.out); err != nil {
		return err
	}
	d.say("Run it yourself: " + d.command() + " storm --scenario incident18 (or storm27; --help for the knobs)")
	return nil
}
