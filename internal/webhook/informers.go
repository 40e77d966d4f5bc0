package webhook

import (
	"context"

	"github.com/retrycap/retrycap/internal/index"
)

// The webhooks read the workload index (index.Index) that kubeobj.FeedIndex fills from the
// manager's informers: the operator builds one for the controller, the gate and the injector.

// baseRefresher runs the index's Refresh as a manager Runnable. Not leader-elected: every
// replica serves the webhooks from its own index.
type baseRefresher struct{ x *index.Index }

func (r baseRefresher) Start(ctx context.Context) error { return r.x.Refresh(ctx) }

func (baseRefresher) NeedLeaderElection() bool { return false }
