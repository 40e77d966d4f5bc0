package analyze

import (
	"reflect"
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
