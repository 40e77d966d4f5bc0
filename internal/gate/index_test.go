package gate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/inject"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// relevant is RelevantParsed's workloads.
func relevant(x *index.Index, ns, svc string, ups []string) []workload.Workload {
	ps := x.RelevantParsed(ns, []string{svc}, ups)
	if ps == nil {
		return nil
	}
	out := make([]workload.Workload, len(ps))
	for i, p := range ps {
		out[i] = p.Workload
	}
	return out
}

// updateOrCreate makes incoming an update of base (base is returned, as the old workload) or,
// half the time by r, a new workload named new<i> (nil old).
func updateOrCreate(r *rand.Rand, incoming *workload.Workload, base workload.Workload, i int) *workload.Workload {
	incoming.Name = base.Name
	if r.IntN(2) == 0 {
		return &base
	}
	incoming.Name = fmt.Sprintf("new%d", i)
	return nil
}

// wantSameDecision fails round when got, the gate's decision over what over names, differs from
// full, its decision over the whole namespace (the paths aside: withoutPaths).
func wantSameDecision(t *testing.T, round int, over string, got, full Decision) {
	t.Helper()
	if !reflect.DeepEqual(withoutPaths(got), withoutPaths(full)) {
		t.Fatalf("round %d: %s the gate decides\n %#v\nover all of them\n %#v", round, over, got, full)
	}
}

var pathPattern = regexp.MustCompile(`[a-z0-9.-]+( -x[0-9]+-> [a-z0-9.-]+)+`)

// timePathPattern is a time chain's path and times ("gateway 3s -> order 900ms -> payment ?").
var timePathPattern = regexp.MustCompile(`[a-z0-9.-]+ [0-9a-zµ.?]+( -> [a-z0-9.-]+ [0-9a-zµ.?]+)+`)

// withoutPaths blanks the paths in d's messages: when two paths tie for the worst, which one the
// graph names depends on node numbering, which differs between a subset and the whole. Products,
// caps, plans and rewrites must still agree.
func withoutPaths(d Decision) Decision {
	d.Message = timePathPattern.ReplaceAllString(pathPattern.ReplaceAllString(d.Message, "<path>"), "<path>")
	ws := make([]string, len(d.Warnings))
	for i, w := range d.Warnings {
		ws[i] = timePathPattern.ReplaceAllString(pathPattern.ReplaceAllString(w, "<path>"), "<path>")
	}
	d.Warnings = ws
	return d
}

// TestRelevantMatchesWholeNamespace checks the claim Relevant rests on: the gate decides the same
// over the relevant subset as over the whole namespace, for every mode, with and without
// selectors and explicit entrypoints, on creates and on updates.
func TestRelevantMatchesWholeNamespace(t *testing.T) {
	relevantRounds(t, rand.New(rand.NewPCG(1, 2)), false)
}

// TestRelevantMatchesWholeNamespaceTime is TestRelevantMatchesWholeNamespace with per-try
// timeouts on the upstreams and a maxTimeToAnswer on the policies: the chains the gate times are
// those through the incoming workload, which the relevant subset holds whole.
func TestRelevantMatchesWholeNamespaceTime(t *testing.T) {
	relevantRounds(t, rand.New(rand.NewPCG(29, 30)), true)
}

// withTimeouts gives each upstream of ws a random per-try timeout (some none).
func withTimeouts(r *rand.Rand, ws []workload.Workload) []workload.Workload {
	for i, w := range ws {
		ups, err := annotations.ParseUpstreams(w.Annotations.Get(annotations.Upstreams))
		if err != nil || len(ups) == 0 {
			continue
		}
		for k := range ups {
			if r.IntN(4) > 0 {
				ups[k].PerTryTimeout = time.Duration(1+r.IntN(40)) * 50 * time.Millisecond
			}
		}
		ws[i].Annotations = w.Annotations.With(annotations.Upstreams, annotations.FormatUpstreams(ups))
	}
	return ws
}

// relevantRounds is the body of the two tests above.
func relevantRounds(t *testing.T, r *rand.Rand, timed bool) {
	modes := []v1alpha1.Enforcement{v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit}
	decisions, prepared, timeDecisions := 0, 0, 0
	for round := 0; round < 300; round++ {
		// Half the rounds without cycles, where the prepared graph answers rather than defers.
		ws := workloadtest.RandomWorkloads(r, 5+r.IntN(25), round%2 == 0)
		if timed {
			ws = withTimeouts(r, ws)
		}
		x := index.New()
		for _, w := range ws {
			x.Put(w)
		}
		var ps []*v1alpha1.RetryPolicy
		for k := 1 + r.IntN(2); k > 0; k-- {
			p := workloadtest.Policy(fmt.Sprintf("p%d", k), int32(1+r.IntN(12)), modes[r.IntN(3)], nil)
			p.Spec.Entrypoints = nil
			if r.IntN(2) == 0 {
				p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}
			}
			if r.IntN(3) == 0 {
				p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: fmt.Sprintf("s%d", r.IntN(5)), ClientAttempts: int32(1 + r.IntN(3))}}
			}
			if timed {
				p.Spec.MaxAmplification = 1000
				p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: time.Duration(1+r.IntN(60)) * 100 * time.Millisecond}
			}
			ps = append(ps, p)
		}
		for i := 0; i < 5; i++ {
			base := ws[r.IntN(len(ws))]
			incoming := workloadtest.RandomWorkloads(r, 1+r.IntN(len(ws)), round%2 == 0)[0]
			if timed {
				incoming = withTimeouts(r, []workload.Workload{incoming})[0]
			}
			old := updateOrCreate(r, &incoming, base, i)
			full := Decide(Input{Policies: ps, Source: workloads(ws), Incoming: incoming, Old: old})
			sub := relevant(x, "shop", incoming.ServiceName(), index.UpstreamServices(incoming))
			got := Decide(Input{Policies: ps, Source: workloads(sub), Incoming: incoming, Old: old})
			wantSameDecision(t, round, fmt.Sprintf("over %d of %d workloads", len(sub), len(ws)), got, full)
			// The handler's path: the index's parsed workloads, not parsed again.
			viaIndex := Decide(Input{Policies: ps, Incoming: incoming, Old: old, Source: x.ForMode(incoming, index.BaseNever)})
			wantSameDecision(t, round, "over the index's parsed workloads", viaIndex, full)
			// The handler's path for a large share of a large namespace: the policy's prepared
			// graph of the whole namespace, judged with the incoming edges in place.
			viaBase := Decide(Input{Policies: ps, Incoming: incoming, Old: old, Source: x.ForMode(incoming, index.BaseAlways)})
			wantSameDecision(t, round, "against the prepared graph", viaBase, full)
			for _, p := range ps {
				if ok, _ := workload.ForRetryPolicy(p).Selects(incoming); ok {
					if _, _, answered := x.Base("shop", p).Judge(workload.Parse(incoming)); answered {
						prepared++
					}
				}
			}
			if !full.Allowed || full.Rewrite != nil || len(full.Warnings) > 0 {
				decisions++
			}
			if strings.Contains(full.Message+strings.Join(full.Warnings, ""), "maxTimeToAnswer") {
				timeDecisions++
			}
		}
	}
	if decisions < 100 {
		t.Fatalf("only %d of 1500 random requests were refused, rewritten or warned: the test says little", decisions)
	}
	// Random namespaces have cycles, where the prepared graph defers to a build; enough of the
	// requests must be answered by it for the comparison to say something.
	if timed && timeDecisions < 100 {
		t.Fatalf("only %d decisions were about maxTimeToAnswer", timeDecisions)
	}
	if !timed && prepared < 500 {
		t.Fatalf("the prepared graph answered only %d requests", prepared)
	}
	t.Logf("%d decisions (%d about the time), %d judgements answered by the prepared graph", decisions, timeDecisions, prepared)
}

func TestIndexIgnoresUpdatesThatChangeNoWorkloadField(t *testing.T) {
	x := index.New()
	w := workloadtest.Deployment("order", "payment=3")
	x.Put(w)
	list := x.Workloads("shop")
	same := workloadtest.Deployment("order", "payment=3")
	x.Put(same)
	if got := x.Workloads("shop"); &got[0] != &list[0] {
		t.Fatalf("an identical update rebuilt the namespace's list")
	}
	x.Put(workloadtest.Deployment("order", "payment=1, audit"))
	if got := relevant(x, "shop", "gateway", []string{"order"}); len(got) != 1 || got[0].Annotations.Get(annotations.Upstreams) != "payment=1, audit" {
		t.Fatalf("Relevant after an update = %v", got)
	}
	x.Remove(w)
	if n := x.Len("shop"); n != 0 {
		t.Fatalf("Len after remove = %d", n)
	}
	if got := relevant(x, "shop", "order", nil); got != nil {
		t.Fatalf("Relevant of an emptied namespace = %v", got)
	}
}

// The injector's question (is the pod's service an entrypoint of the policy's graph?) has the
// same answer over RelevantWorkloads as over the whole namespace, on random graphs.
func TestRelevantWorkloadsDecideEntrypoints(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	checked, entry := 0, 0
	for round := 0; round < 300; round++ {
		ws := workloadtest.RandomWorkloads(r, 5+r.IntN(25), round%2 == 0)
		x := index.New()
		for _, w := range ws {
			x.Put(w)
		}
		p := workloadtest.Policy("p", 4, v1alpha1.EnforcementReject, nil)
		p.Spec.Entrypoints = nil
		if r.IntN(2) == 0 {
			p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}
		}
		for i := 0; i < 5; i++ {
			w := ws[r.IntN(len(ws))]
			if r.IntN(2) == 0 {
				w = workloadtest.RandomWorkloads(r, 1+r.IntN(len(ws)), round%2 == 0)[0]
				w.Name = fmt.Sprintf("new%d", i)
			}
			full := inject.IsEntrypoint(workload.ForRetryPolicy(p), ws, w)
			if got := inject.IsEntrypoint(workload.ForRetryPolicy(p), x.RelevantWorkloads(w), w); got != full {
				t.Fatalf("round %d: %s is an entrypoint over its relevant workloads: %v, over the namespace: %v", round, w, got, full)
			}
			checked++
			if full {
				entry++
			}
		}
	}
	if entry == 0 || entry == checked {
		t.Fatalf("degenerate rounds: %d entrypoints of %d", entry, checked)
	}
}
