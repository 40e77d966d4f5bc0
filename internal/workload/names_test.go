package workload

import (
	"slices"
	"testing"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/annotations/nametest"
	proxypolicy "github.com/retrycap/retrycap/internal/proxy/policy"
)

// TestUpstreamNameRule runs the one table of the upstream-name rule against the graph and the
// proxy's host matching: the proxy matches a host to an upstream exactly when the graph has an
// edge to the host's node, and that upstream is that node.
func TestUpstreamNameRule(t *testing.T) {
	cases := nametest.Cases()
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		// The proxy: the upstream the host names (policy.MatchIn: an exact listing first, then the
		// first lenient match in --upstreams order).
		ups, err := proxypolicy.ParseUpstreams(c.Upstreams)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		matched := ""
		if i := proxypolicy.MatchIn([]byte(c.Host), ups, func(u proxypolicy.Upstream) string { return u.Name }, c.Namespace); i >= 0 {
			matched = ups[i].Name
		}
		if matched != c.Match {
			t.Errorf("%s: proxy matches %q, want %q", c, matched, c.Match)
		}
		if c.Namespace == "" {
			continue // the graph always has a namespace
		}
		// The graph: the nodes of the workload's upstreams, in its namespace.
		x := Parse(Workload{Kind: KindDeployment, Namespace: c.Namespace, Name: "caller",
			Annotations: PairsOf(map[string]string{annotations.Upstreams: c.Upstreams})})
		nodes := x.UpstreamNames()
		if c.Match != "" {
			if got := NormalizeUpstream(c.Match, c.Namespace); got != c.Node {
				t.Errorf("%s: the graph's node of upstream %q is %q, want %q", c, c.Match, got, c.Node)
			}
		}
		// A host that is also a valid upstream name is the same node written as one.
		if annotations.ValidateHost(c.Host) == "" {
			if got := NormalizeUpstream(c.Host, c.Namespace); got != c.Node {
				t.Errorf("%s: the graph's node of %q is %q, want %q", c, c.Host, got, c.Node)
			}
			if has := slices.Contains(nodes, c.Node); has != (c.Match != "") {
				t.Errorf("%s: graph nodes %v (has %q: %t), proxy match %q", c, nodes, c.Node, has, c.Match)
			}
		}
	}
}
