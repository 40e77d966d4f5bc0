package analyze

import (
	"reflect"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/graph"
)

// The human output said the same fix once per chain (the OpenTelemetry demo in Istio at cap 2:
// 14 chains, each with the 400-character fix for flagd's mesh default); one fix now covers its
// chains, with the edges it is said of and a count. Fixes written per caller stay apart.
func TestSmall20GroupViolations(t *testing.T) {
	const mesh = "Istio default, no VirtualService binds flagd: declare the retries on the callee"
	vs := []graph.Violation{
		{Path: []string{"fraud", "flagd"}, Message: "client -x1-> fraud -x3-> flagd = 3 > cap 2; fraud -x3-> flagd: 3 = ...", Suggestion: "fraud -> flagd: " + mesh},
		{Path: []string{"proxy", "frontend", "flagd"}, Message: "client -x1-> proxy -x1-> frontend -x3-> flagd = 3 > cap 2; frontend -x3-> flagd: 3 = ...", Suggestion: "frontend -> flagd: " + mesh},
		{Path: []string{"a", "mid", "sink"}, Message: "client -x1-> a -x3-> mid -x3-> sink = 9 > cap 2", Suggestion: "a: mid=1"},
		{Path: []string{"b", "mid", "sink"}, Message: "client -x1-> b -x3-> mid -x3-> sink = 9 > cap 2", Suggestion: "b: mid=1"},
		{Path: []string{"proxy", "grafana"}, Message: "client -x1-> proxy -x3-> grafana = 3 > cap 2"},
		{Path: []string{"c", "frontend", "flagd"}, Message: "client -x1-> c -x1-> frontend -x3-> flagd = 3 > cap 2; ...", Suggestion: "frontend -> flagd: " + mesh},
		{Path: []string{"proxy", "grafana2"}, Message: "client -x1-> proxy -x3-> grafana2 = 3 > cap 2"},
	}
	got := groupViolations(vs)
	type g struct {
		fix    string
		edges  []string
		chains int
	}
	var gs []g
	for _, x := range got {
		gs = append(gs, g{x.fix, x.edges, len(x.chains)})
	}
	want := []g{
		{mesh, []string{"fraud -> flagd", "frontend -> flagd"}, 3},
		{"a: mid=1", nil, 1},
		{"b: mid=1", nil, 1},
		{"", nil, 1},
		{"", nil, 1},
	}
	if !reflect.DeepEqual(gs, want) {
		t.Errorf("groupViolations:\n got %+v\nwant %+v", gs, want)
	}
}

// analyze reads a bare upstream name in the workload's namespace: one service under a bare
// name and its name.namespace spelling is warned about, as the gate warns (before: merged in
// silence).
func TestSmall20UpstreamsAliasWarning(t *testing.T) {
	const doc = `apiVersion: apps/v1
kind: Deployment
metadata: {name: checkout, namespace: shop}
spec:
  selector: {matchLabels: {app: checkout}}
  template:
    metadata:
      labels: {app: checkout}
      annotations: {retrycap.dev/upstreams: "payment=2, payment.shop=3"}
    spec: {containers: [{name: app, image: x}]}
`
	m := NewManifests()
	if errs := (Reader{}).Read(m, "d.yaml", strings.NewReader(doc)); len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, w := range m.Warnings {
		got = append(got, w.Msg)
	}
	want := []string{`Deployment shop/checkout: annotation retrycap.dev/upstreams: token "payment.shop=3" at column 12: upstream "payment.shop" is service payment of namespace shop, listed already as "payment" (a name in the workload's namespace) at column 1: the graph counts one upstream with the larger attempts and calls; write it once`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n got %q\nwant %q", got, want)
	}
}
