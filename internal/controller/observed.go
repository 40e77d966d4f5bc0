package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/observed"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/telemetry"
	"github.com/retrycap/retrycap/internal/workload"
)

// SeriesQuerier fetches the per-edge counters (promquery.Client).
type SeriesQuerier interface {
	Series(ctx context.Context, now time.Time) ([]observed.Series, error)
	URL() string
	Window() time.Duration
}

// Observation is one poll of the querier: its series, or its error.
type Observation struct {
	Series []observed.Series
	Err    error
	URL    string
	Window time.Duration

	// Graphs says the querier also reads the observed graph (a GraphQuerier); the fields below
	// are then set. Graph is this poll's graph (nil when GraphErr), GraphAt its query time;
	// LastGraph and LastGraphAt are the last good one, kept across failed polls so that the
	// status can keep it for one window (telemetry.GraphUnavailable).
	Graphs      bool
	Graph       *telemetry.Observation
	GraphErr    error
	GraphAt     time.Time
	LastGraph   *telemetry.Observation
	LastGraphAt time.Time
}

// GraphQuerier runs the discover queries (promquery.Client): the edges Istio, Linkerd, the
// OpenTelemetry service graph and the proxies observed over the window.
type GraphQuerier interface {
	Graph(ctx context.Context, now time.Time, gateways []string) (*telemetry.Observation, error)
}

// Observer polls a SeriesQuerier every Interval and tells its subscribers after each poll;
// the reconcilers read its latest Observation (nil Observer: no observed amplification, no
// condition). It is a manager Runnable that runs on the leader only: followers do not reconcile,
// so their queries would load Prometheus for nothing.
type Observer struct {
	Query    SeriesQuerier
	Interval time.Duration

	mu     sync.Mutex
	latest *Observation
	subs   []func()
}

// Start polls at once, then every Interval, until ctx ends. A failed query is an Observation
// too (its error goes into the condition); nothing here ends the manager.
func (o *Observer) Start(ctx context.Context) error {
	every := o.Interval
	if every <= 0 {
		every = time.Minute // a ticker needs a positive period; the manager's default
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		o.Poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: only the leader polls.
func (o *Observer) NeedLeaderElection() bool { return true }

// Poll queries once, stores the result and tells the subscribers.
func (o *Observer) Poll(ctx context.Context) {
	series, err := o.Query.Series(ctx, time.Now())
	if err != nil {
		log.FromContext(ctx).Info("observed amplification: query failed", "url", o.Query.URL(), "error", err.Error())
	}
	next := &Observation{Series: series, Err: err, URL: o.Query.URL(), Window: o.Query.Window()}
	if gq, ok := o.Query.(GraphQuerier); ok {
		// The graph's queries run here, in the poller, never in a reconcile: a Prometheus that
		// is slow holds up the next poll, not the controller.
		next.Graphs, next.GraphAt = true, time.Now()
		next.Graph, next.GraphErr = gq.Graph(ctx, next.GraphAt, nil)
		if next.GraphErr != nil {
			next.Graph = nil
			log.FromContext(ctx).Info("observed graph: query failed", "url", o.Query.URL(), "error", next.GraphErr.Error())
		}
	}
	o.mu.Lock()
	if next.Graph != nil {
		next.LastGraph, next.LastGraphAt = next.Graph, next.GraphAt
	} else if o.latest != nil {
		next.LastGraph, next.LastGraphAt = o.latest.LastGraph, o.latest.LastGraphAt
	}
	o.latest = next
	subs := append([]func(){}, o.subs...)
	o.mu.Unlock()
	for _, f := range subs {
		f()
	}
}

// Latest is the last poll's observation; nil before the first poll ends.
func (o *Observer) Latest() *Observation {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.latest
}

// OnChange subscribes f to the end of every poll.
func (o *Observer) OnChange(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.subs = append(o.subs, f)
}

// setObserved puts the observed amplification and ObservedWithinComputed into st: nothing
// without an Observer or before its first poll; on a failed query the condition is Unknown
// and the last observed figures stay (they say when they were true: the condition's message
// says they are not current). res nil (an invalid selector): the observed side is cleared with
// the graph.
func setObserved(o *Observer, st *v1alpha1.RetryPolicyStatus, res *workload.Result, node observed.Node, generation int64, now time.Time) {
	obs := o.Latest()
	if obs == nil {
		return
	}
	var c metav1.Condition
	switch {
	case res == nil:
		st.ObservedAmplification = nil
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionObservedWithinComputed)
		return
	case obs.Err != nil:
		c = observed.Unavailable(obs.URL, obs.Err, generation)
	default:
		r := observed.Compute(res.Graph.Edges(), obs.Series, node)
		st.ObservedAmplification = observed.Status(r, obs.Window)
		c = observed.Condition(r, obs.Window, generation)
	}
	c.LastTransitionTime = metav1.NewTime(now)
	status.SetCondition(&st.Conditions, c)
}

// observedChanges reconciles every RetryPolicy after each poll: the counters bear on any of
// them. It does not wait for the first poll (a Prometheus that is down must not hold up the
// controller).
type observedChanges struct {
	o      *Observer
	c      client.Client
	list   client.ObjectList
	policy func(client.ObjectList) []types.NamespacedName
	what   string
}

func (s *observedChanges) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.o.OnChange(func() {
		list := s.list.DeepCopyObject().(client.ObjectList)
		if err := s.c.List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing the policies an observation bears on", "kind", s.what)
			return
		}
		for _, n := range s.policy(list) {
			q.Add(reconcile.Request{NamespacedName: n})
		}
	})
	return nil
}

func (s *observedChanges) WaitForSync(context.Context) error { return nil }

func (s *observedChanges) String() string { return "observed amplification (" + s.what + ")" }

func retryPolicyNames(l client.ObjectList) []types.NamespacedName {
	list := l.(*v1alpha1.RetryPolicyList)
	out := make([]types.NamespacedName, len(list.Items))
	for i := range list.Items {
		out[i] = types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}
	}
	return out
}

func clusterPolicyNames(l client.ObjectList) []types.NamespacedName {
	list := l.(*v1alpha1.ClusterRetryPolicyList)
	out := make([]types.NamespacedName, len(list.Items))
	for i := range list.Items {
		out[i] = types.NamespacedName{Name: list.Items[i].Name}
	}
	return out
}

func (r *RetryPolicyReconciler) observedSource() *observedChanges {
	return &observedChanges{o: r.Observed, c: r.Client, list: &v1alpha1.RetryPolicyList{}, policy: retryPolicyNames, what: "RetryPolicy"}
}

func (r *ClusterRetryPolicyReconciler) observedSource() *observedChanges {
	return &observedChanges{o: r.Observed, c: r.Client, list: &v1alpha1.ClusterRetryPolicyList{}, policy: clusterPolicyNames, what: "ClusterRetryPolicy"}
}
