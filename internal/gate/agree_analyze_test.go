package gate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/storm"
	"github.com/retrycap/retrycap/internal/workload"
)

// TestRejectAgreesWithAnalyze is the differential test of the workload gate under Reject and
// `retrycap analyze` on the same objects: the repo's samples (config/samples: storm27,
// incident18, the ClusterRetryPolicy chain across three namespaces) and the storm lab's chains
// (storm.Scenarios: client -> gateway -> order -> payment with each preset's attempts and cap).
// Every policy is made Reject.
//   - Create: each selected workload, the others stored, is refused exactly when analyze, on all
//     of them, lists a chain over the cap through one of its edges (a violation whose path leaves
//     its node).
//   - Update: each upstream of each workload raised by 1 is refused exactly when analyze, with
//     the raised workload in place, lists such a chain; lowered by 1, or kept (an image bump), it
//     is admitted whatever analyze says (a chain already over can be repaired), and analyze's
//     worst chain through it is no worse than before.
func TestRejectAgreesWithAnalyze(t *testing.T) {
	var sets []agreeSet
	for _, f := range []string{"storm27.yaml", "incident18.yaml", "cluster-chain.yaml"} {
		m, errs := analyze.Reader{}.ReadPaths([]string{"../../config/samples/" + f})
		if len(errs) > 0 {
			t.Fatalf("%s: %v", f, errs)
		}
		sets = append(sets, agreeSet{"config/samples/" + f, m})
	}
	for _, name := range storm.ScenarioNames() {
		sets = append(sets, agreeSet{"storm lab " + name, stormManifests(storm.Scenarios[name])})
	}
	// Each set again with every cap at its worst chain (all within it, every raise over it):
	// both verdicts are compared.
	for _, s := range slices.Clone(sets) {
		sets = append(sets, atWorst(s))
	}
	creates, updates, refused := 0, 0, 0
	for _, s := range sets {
		for _, p := range s.m.Policies {
			p.Spec.Enforcement = v1alpha1.EnforcementReject
		}
		for _, p := range s.m.ClusterPolicies {
			p.Spec.Enforcement = v1alpha1.EnforcementReject
		}
		ws := s.m.Workloads
		for i, w := range ws {
			nodes := selectingNodes(t, s.m, w)
			if len(nodes) == 0 {
				continue
			}
			others := slices.Delete(slices.Clone(ws), i, i+1)
			what := fmt.Sprintf("%s: create %s (%s)", s.name, w, w.Annotations.Get(annotations.Upstreams))
			d := Decide(s.input(others, w, nil))
			over := overThrough(s.m, ws, nodes)
			if d.Allowed == over {
				t.Errorf("%s: gate allowed=%v (%s), analyze over the cap through it=%v", what, d.Allowed, d.Message, over)
			}
			if !d.Allowed {
				refused++
				if !strings.Contains(d.Message, "RetryPolicy ") || !strings.Contains(d.Message, " > cap ") {
					t.Errorf("%s: the refusal names no policy and cap: %s", what, d.Message)
				}
			}
			creates++

			ups, err := annotations.ParseUpstreams(w.Annotations.Get(annotations.Upstreams))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for j, u := range ups {
				a := max(int64(u.Attempts), 1)
				for _, n := range []int64{a + 1, max(a-1, 1), a} {
					changed := slices.Clone(ups)
					changed[j].Attempts = int32(n)
					nw := w
					nw.Annotations = w.Annotations.With(annotations.Upstreams, annotations.FormatUpstreams(changed))
					after := slices.Clone(ws)
					after[i] = nw
					what := fmt.Sprintf("%s: update %s %s -> %s", s.name, w, w.Annotations.Get(annotations.Upstreams), nw.Annotations.Get(annotations.Upstreams))
					d := Decide(s.input(ws, nw, &w))
					if n > a {
						if over := overThrough(s.m, after, nodes); d.Allowed == over {
							t.Errorf("%s: gate allowed=%v (%s), analyze over the cap through it=%v", what, d.Allowed, d.Message, over)
						}
					} else {
						if !d.Allowed {
							t.Errorf("%s: an update that raises nothing is refused: %s", what, d.Message)
						}
						if before, now := worstThrough(s.m, ws, nodes), worstThrough(s.m, after, nodes); now > before {
							t.Errorf("%s: admitted as raising nothing, analyze's worst chain through it %d > %d", what, now, before)
						}
					}
					updates++
				}
			}
		}
	}
	// Nothing compared is a failure: 3 + 4 + 3 workloads of the samples, 4 per storm chain, twice.
	if creates < 36 || updates < 60 || refused == 0 || refused == creates {
		t.Fatalf("compared %d creates (%d refused) and %d updates: the inputs hold more", creates, refused, updates)
	}
	t.Logf("compared %d creates (%d refused) and %d updates", creates, refused, updates)
}

// agreeSet is one input of TestRejectAgreesWithAnalyze: the objects analyze read.
type agreeSet struct {
	name string
	m    *analyze.Manifests
}

// atWorst is s with each policy's cap at the worst chain analyze finds under it.
func atWorst(s agreeSet) agreeSet {
	worst := map[string]int64{}
	for _, pr := range analyzed(s.m, s.m.Workloads) {
		worst[refOf(pr)] = pr.Amplification
	}
	m := *s.m
	m.Policies, m.ClusterPolicies = nil, nil
	for _, p := range s.m.Policies {
		p = p.DeepCopy()
		p.Spec.MaxAmplification = int32(worst[workload.ForRetryPolicy(p).Ref().String()])
		m.Policies = append(m.Policies, p)
	}
	for _, p := range s.m.ClusterPolicies {
		p = p.DeepCopy()
		p.Spec.MaxAmplification = int32(worst[workload.KindClusterRetryPolicy+" "+p.Name])
		m.ClusterPolicies = append(m.ClusterPolicies, p)
	}
	return agreeSet{s.name + " (caps at the worst chain)", &m}
}

// input is the gate's Input for incoming with stored (its namespaces' labels, for the cluster
// policies).
func (s agreeSet) input(stored []workload.Workload, incoming workload.Workload, old *workload.Workload) Input {
	return Input{Policies: s.m.Policies, ClusterPolicies: s.m.ClusterPolicies, Incoming: incoming, Old: old,
		Source: clusterWorkloads{ws: stored, labels: s.m.NamespaceLabels, svcs: s.m.Services}}
}

// selectingNodes are w's nodes in each policy of m that selects it, by "Kind ns/name".
func selectingNodes(t *testing.T, m *analyze.Manifests, w workload.Workload) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(p *workload.Policy) {
		ok, err := p.Selects(w)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out[p.Ref().String()] = p.Node(workload.Parse(w).ServiceName(), w.Namespace)
		}
	}
	for _, p := range m.Policies {
		add(workload.ForRetryPolicy(p))
	}
	for _, p := range m.ClusterPolicies {
		scope, err := workload.NewClusterScope(p, m.NamespaceLabels)
		if err != nil {
			t.Fatal(err)
		}
		if scope.Has(w.Namespace) {
			add(workload.ForClusterRetryPolicy(p, scope))
		}
	}
	return out
}

// analyzed is analyze's report on m's policies and ws.
func analyzed(m *analyze.Manifests, ws []workload.Workload) []analyze.PolicyReport {
	a := analyze.NewManifests()
	a.Policies, a.ClusterPolicies, a.NamespaceLabels, a.Services, a.Workloads = m.Policies, m.ClusterPolicies, m.NamespaceLabels, m.Services, ws
	return a.Analyze().Policies
}

// refOf is a report's policy as workload.PolicyRef.String writes it.
func refOf(pr analyze.PolicyReport) string {
	if pr.Kind != "" {
		return workload.KindClusterRetryPolicy + " " + pr.Name
	}
	return workload.KindRetryPolicy + " " + pr.Namespace + "/" + pr.Name
}

// overThrough reports whether analyze lists, for a policy with a node of nodes, a chain over its
// cap that leaves that node (through one of the workload's edges).
func overThrough(m *analyze.Manifests, ws []workload.Workload, nodes map[string]string) bool {
	for _, pr := range analyzed(m, ws) {
		n, ok := nodes[refOf(pr)]
		if !ok {
			continue
		}
		for _, v := range pr.Violations {
			if i := slices.Index(v.Path, n); i >= 0 && i < len(v.Path)-1 {
				return true
			}
		}
	}
	return false
}

// worstThrough is the largest amplification of analyze's listed chains that leave one of nodes.
func worstThrough(m *analyze.Manifests, ws []workload.Workload, nodes map[string]string) int64 {
	var worst int64
	for _, pr := range analyzed(m, ws) {
		n, ok := nodes[refOf(pr)]
		if !ok {
			continue
		}
		for _, c := range pr.Violations {
			if i := slices.Index(c.Path, n); i >= 0 && i < len(c.Path)-1 {
				worst = max(worst, c.Amplification)
			}
		}
	}
	return worst
}

// stormManifests is the storm lab's chain of sc as workloads and a policy: client -> gateway ->
// order -> payment with sc's attempts per hop, the cap sc's chain cap, client the entrypoint
// with sc's client attempts (internal/storm's hopNames and proxyArgs).
func stormManifests(sc storm.Scenario) *analyze.Manifests {
	const ns = "storm"
	m := analyze.NewManifests()
	dep := func(name, ups string) workload.Workload {
		w := workload.Workload{Kind: workload.KindDeployment, Namespace: ns, Name: name,
			Labels: workload.PairsOf(map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "storm"})}
		w.Annotations = w.Annotations.With(annotations.Service, name)
		if ups != "" {
			w.Annotations = w.Annotations.With(annotations.Upstreams, ups)
		}
		return w
	}
	m.Workloads = []workload.Workload{
		dep("client", fmt.Sprintf("gateway=%d", sc.Attempts[0])),
		dep("gateway", fmt.Sprintf("order=%d", sc.Attempts[1])),
		dep("order", fmt.Sprintf("payment=%d", sc.Attempts[2])),
		dep("payment", ""),
	}
	m.Policies = []*v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sc.Name},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: int32(sc.ChainCap),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/part-of": "storm"}},
			Entrypoints: []v1alpha1.Entrypoint{{Service: "client", ClientAttempts: int32(sc.ClientAttempts)}},
			Retry:       v1alpha1.RetrySettings{DefaultAttempts: 1}}}}
	return m
}
