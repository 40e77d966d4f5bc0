package controller

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/telemetry"
	"github.com/retrycap/retrycap/internal/workload"
)

// setGraph puts status.graph and GraphComplete into st from the Observer's latest poll (never a
// query of its own: a reconcile does not wait on Prometheus). Nothing without an Observer, a
// querier that reads no graph, or before the first poll; res nil (an invalid selector) clears
// them. A failed poll keeps the last good observation for one window, then the status is on
// declarations alone and the condition says so. The amplification is not recomputed with the
// undeclared edges here (telemetry.AddUndeclared): the graph the status is computed on is the
// shared incremental one, and the admission gate must keep judging declarations alone.
func setGraph(o *Observer, st *v1alpha1.RetryPolicyStatus, res *workload.Result, generation int64, now time.Time) {
	obs := o.Latest()
	if obs == nil || !obs.Graphs {
		return
	}
	if res == nil {
		status.ClearGraph(st)
		return
	}
	caller, callee := nodeMappers(res)
	var (
		c    metav1.Condition
		snap *telemetry.Snapshot
		gs   *v1alpha1.GraphStatus
	)
	switch {
	case obs.GraphErr != nil:
		var last *telemetry.Snapshot
		if obs.LastGraph != nil {
			s := telemetry.OnNodes(obs.LastGraph, obs.LastGraphAt, caller, callee)
			last = &s
		}
		c, snap = telemetry.GraphUnavailable(obs.URL, obs.GraphErr, last, now, generation)
		if snap != nil {
			gs = telemetry.CompareGraph(res.Graph, *snap)
		}
	case len(obs.Graph.Sources) == 0:
		c = telemetry.NoTelemetry(obs.URL, obs.Graph.Window, generation)
	default:
		s := telemetry.OnNodes(obs.Graph, obs.GraphAt, caller, callee)
		gs = telemetry.CompareGraph(res.Graph, s)
		c = telemetry.GraphConditionDeclared(gs, generation)
	}
	c.LastTransitionTime = metav1.NewTime(now)
	status.SetGraph(st, gs, c)
}

// nodeMappers name observed callers and callees as res's graph does. A caller is one of the
// policy's selected workloads (Istio's and Linkerd's callers name the workload: its service
// node; the service graph's and the proxies' name a service: kept when it is a selected
// workload's service node); any other caller's edges are not the policy's. A callee in the
// policy's namespace is its Service's name, one elsewhere "name.ns" (as an annotation writes
// it); a cluster policy names every node "name.ns" (workload.Policy.Node). A callee without a
// namespace (a host the data does not place) is dropped.
func nodeMappers(res *workload.Result) (func(telemetry.Caller) (string, bool), func(telemetry.Callee) (string, bool)) {
	name := res.Policy.Node
	byWorkload := make(map[[2]string][]workload.Workload, len(res.Selected))
	services := make(map[string]bool, len(res.ServiceOf))
	for _, w := range res.Selected {
		k := [2]string{w.Namespace, w.Name}
		byWorkload[k] = append(byWorkload[k], w)
	}
	for _, n := range res.ServiceOf {
		services[n] = true
	}
	caller := func(c telemetry.Caller) (string, bool) {
		if c.Service {
			if n := name(c.Name, c.Namespace); c.Namespace != "" && services[n] {
				return n, true
			}
			return "", false
		}
		for _, w := range byWorkload[[2]string{c.Namespace, c.Name}] {
			if c.Kind == "" || strings.EqualFold(c.Kind, w.Kind) {
				n, ok := res.ServiceOf[w.Key()]
				return n, ok
			}
		}
		return "", false
	}
	callee := func(c telemetry.Callee) (string, bool) {
		if c.Namespace == "" {
			return "", false
		}
		return name(c.Name, c.Namespace), true
	}
	return caller, callee
}
