package webhook

import (
	"context"

	"github.com/retrycap/retrycap/internal/gate"
)

// The webhooks read the workload index (gate.Index) that cluster.FeedIndex fills from the
// manager's informers: the operator builds one for the controller, the gate and the injector.

// baseRefresher runs the index's Refresh as a manager Runnable. Not leader-elected: every
// replica serves the webhooks from its own index.
type baseRefresher struct{ x *gate.Index }

func (r baseRefresher) Start(ctx context.Context) error { return r.x.Refresh(ctx) }

func (baseRefresher) NeedLeaderElection() bool { return false }
