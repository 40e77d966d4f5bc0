package telemetry

import (
	"slices"
	"time"
)

// OnNodes places an observation's HTTP edges on a policy's graph: caller names the node of an
// edge's caller (a selected workload's service node; false: the caller is not one of the
// policy's workloads, and the edge is not the policy's), callee the node of its callee (false:
// not placeable, e.g. outside the policy's scope). Edges whose two ends land on one node (a
// service calling itself through its Service) are kept: the graph can declare them too. The
// snapshot carries the observation's window and sources and the time at of its query, and the
// nodes of the Services mesh gateways and callers outside the mesh call (callee's names, each
// once, in the observation's order): the default entrypoints telemetry adds (AddEntrypoints).
func OnNodes(o *Observation, at time.Time, caller func(Caller) (string, bool), callee func(Callee) (string, bool)) Snapshot {
	s := Snapshot{Window: o.Window, At: at}
	for _, src := range o.Sources {
		s.Sources = append(s.Sources, string(src))
	}
	for _, e := range o.Edges {
		from, ok := caller(e.From)
		if !ok {
			continue
		}
		to, ok := callee(e.To)
		if !ok {
			continue
		}
		s.Edges = append(s.Edges, NodeEdge{From: from, To: to, RatePerSecond: e.RatePerSecond})
	}
	for _, u := range o.Unplaced {
		if u.To != (Callee{}) {
			n, ok := callee(u.To)
			if !ok {
				continue // a callee outside the policy: not its edge, whoever called
			}
			u.To = Callee{Name: n}
		}
		s.Unplaced = append(s.Unplaced, u)
	}
	for _, e := range o.Entrypoints {
		n, ok := callee(e.Callee)
		if ok && !slices.Contains(s.Entrypoints, n) {
			s.Entrypoints = append(s.Entrypoints, n)
		}
	}
	return s
}
