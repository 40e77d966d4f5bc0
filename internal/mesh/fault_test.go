package mesh

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

// testDelayVS is the shape of Istio's samples/bookinfo/networking/virtual-service-ratings-test-delay.yaml
// (a route for the header end-user=jason delaying every request 7s, and a route for the rest),
// hand-written, with the namespace the tests use.
const testDelayVS = "  hosts: [ratings]\n  http:\n  - match:\n    - headers: {end-user: {exact: jason}}\n    fault:\n      delay:\n        percentage: {value: 100.0}\n        fixedDelay: 7s\n    route:\n    - destination: {host: ratings, subset: v1}\n  - route:\n    - destination: {host: ratings, subset: v1}\n"

// TestLayerTimeFaultDelay reads a VirtualService route's fault.delay into its layer: held once
// per request, before the tries and outside the timeouts; the longest of the routes that can
// take the same request (the match can be true); none at 0 %.
func TestLayerTimeFaultDelay(t *testing.T) {
	envoy := func(per, total, delay time.Duration, source string) LayerTime {
		return LayerTime{PerTry: per, Timeout: total, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax, Delay: delay, Source: source}
	}
	const fd = "VirtualService bookinfo/ratings spec.http[0].fault.delay.fixedDelay"
	for _, tc := range []struct {
		name string
		body string
		want LayerTime
	}{
		{"Istio's test-delay sample: 7s on every request of the jason route", testDelayVS,
			envoy(0, 0, 7*time.Second, fd+" 7s")},
		{"a delay on another route of the object counts, its timeouts not",
			"  hosts: [ratings]\n  http:\n  - match: [{headers: {end-user: {exact: jason}}}]\n    fault: {delay: {percentage: {value: 100}, fixedDelay: 7s}}\n    timeout: 30s\n  - retries: {attempts: 3, perTryTimeout: 1s}\n    timeout: 2s\n",
			envoy(time.Second, 2*time.Second, 7*time.Second, "VirtualService bookinfo/ratings spec.http[1], "+fd+" 7s")},
		{"the longest delay of the routes; a share under 100 % counts and is named",
			"  hosts: [ratings]\n  http:\n  - fault: {delay: {percentage: {value: 0.5}, fixedDelay: 9s}}\n  - fault: {delay: {percentage: {value: 100}, fixedDelay: 2s}}\n",
			envoy(0, 0, 9*time.Second, fd+" 9s at 0.5%")},
		{"the deprecated percent", "  hosts: [ratings]\n  http:\n  - fault: {delay: {percent: 30, fixedDelay: 1500ms}}\n",
			envoy(0, 0, 1500*ms, fd+" 1500ms at 30%")},
		{"a percent Istio does not check (over 100): Envoy holds every request", "  hosts: [ratings]\n  http:\n  - fault: {delay: {percent: 250, fixedDelay: 1s}}\n",
			envoy(0, 0, time.Second, fd+" 1s")},
		{"percentage 0: no delay", "  hosts: [ratings]\n  http:\n  - fault: {delay: {percentage: {value: 0}, fixedDelay: 7s}}\n    timeout: 3s\n",
			envoy(0, 3*time.Second, 0, "VirtualService bookinfo/ratings spec.http[0]")},
		{"no percentage nor percent: Istio sends 0 %, no delay", "  hosts: [ratings]\n  http:\n  - fault: {delay: {fixedDelay: 7s}}\n",
			envoy(0, 0, 0, "")},
		{"an abort alone: no time", "  hosts: [ratings]\n  http:\n  - fault: {abort: {percentage: {value: 100}, httpStatus: 503}}\n",
			envoy(0, 0, 0, "")},
		{"a delay on an ingress gateway's route does not hold the sidecars' requests",
			"  hosts: [ratings]\n  http:\n  - match: [{gateways: [istio-system/bookinfo-gateway]}]\n    fault: {delay: {percentage: {value: 100}, fixedDelay: 7s}}\n  - timeout: 2s\n",
			envoy(0, 2*time.Second, 0, "VirtualService bookinfo/ratings spec.http[1]")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, nsIstio+"\n---\n"+vs("bookinfo", "ratings", tc.body))
			e := s.Edge(caller("bookinfo"), "ratings")
			if len(e.Layers) != 1 {
				t.Fatalf("layers %+v", e.Layers)
			}
			if got := s.LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("LayerTime(%+v)\n got %+v\nwant %+v", e.Layers[0], got, tc.want)
			}
			if got := s.Clone().LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("clone: %+v", got)
			}
			if got := s.TimeLayer(e.Layers[0]).Delay; got != tc.want.Delay {
				t.Errorf("TimeLayer Delay %v, want %v", got, tc.want.Delay)
			}
		})
	}
}

// TestFaultDelayChain: the delay in the time along reviews -> ratings, over Istio's default
// tries: reviews' own per-try 10s covers 7s + the route's 2s timeout, so reviews takes 9s (2s
// without the delay), and its caller's 5s per-try is an inversion.
func TestFaultDelayChain(t *testing.T) {
	s := set(t, Options{}, nsIstio+"\n---\n"+vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - fault: {delay: {percentage: {value: 100}, fixedDelay: 7s}}\n    timeout: 2s\n"))
	g := graph.New()
	g.AddEdge("productpage", "reviews", 1, 1)
	g.AddEdge("reviews", "ratings", 3, 1)
	g.SetEntrypoint("productpage", 1)
	g.SetHop("productpage", "reviews", graph.Hop{{Name: "productpage", Tries: 1, PerTry: 5 * time.Second}})
	g.SetHop("reviews", "ratings", s.Hop(graph.TimeLayer{Name: "reviews", Tries: 1, PerTry: 10 * time.Second}, s.Edge(caller("bookinfo"), "ratings")))
	ta := graph.AnalyzeTime(g, 0)
	if got := graph.FormatTime(ta.Worst); got != "5s" {
		t.Errorf("worst %s, want 5s", got)
	}
	want := []string{"productpage -> reviews: productpage per-try timeout 5s < reviews's worst time 9s: productpage retries while reviews still works on the abandoned try"}
	var got []string
	for _, inv := range ta.Inversions {
		got = append(got, inv.Message)
	}
	if !slices.Equal(got, want) {
		t.Errorf("inversions\n got %q\nwant %q", got, want)
	}
}

// TestFaultDelayWarning: the edge names the delay it counts.
func TestFaultDelayWarning(t *testing.T) {
	s := set(t, Options{}, nsIstio+"\n---\n"+vs("bookinfo", "ratings", testDelayVS))
	e := s.Edge(caller("bookinfo"), "ratings")
	want := []string{"VirtualService bookinfo/ratings spec.http[0].fault.delay.fixedDelay 7s: Istio's fault injection holds each request it hits in the caller's proxy before the route's timeouts start: counted once per request in the worst time to answer"}
	if !slices.Equal(e.Warnings, want) {
		t.Errorf("warnings\n got %q\nwant %q", e.Warnings, want)
	}
}

// TestFaultDelayErrors: a delay Istio refuses is an error naming the object, the field and the
// value (the object is never stored, so it holds nothing).
func TestFaultDelayErrors(t *testing.T) {
	const id = "VirtualService bookinfo/ratings spec.http[0].fault.delay"
	for _, tc := range []struct{ delay, want string }{
		{"{percentage: {value: 100}, fixedDelay: 0s}", id + `.fixedDelay: "0s" is refused by Istio (at least 1ms): leave the delay out for none`},
		{"{percentage: {value: 100}, fixedDelay: -1s}", id + `.fixedDelay: "-1s" is not a duration ("500ms", "2s")`},
		{"{percentage: {value: 100}, fixedDelay: 1500us}", id + `.fixedDelay: "1500us" is not a whole number of milliseconds of at least 1ms, as Istio requires`},
		{"{percentage: {value: 100}, fixedDelay: soon}", id + `.fixedDelay: "soon" is not a duration ("500ms", "2s")`},
		{"{percentage: {value: 150}, fixedDelay: 1s}", id + `.percentage.value: 150 is refused by Istio: 0, or 0.0001 to 100`},
		{"{percentage: {value: -5}, fixedDelay: 1s}", id + `.percentage.value: -5 is refused by Istio: 0, or 0.0001 to 100`},
		{"{percentage: {value: 0.00001}, fixedDelay: 1s}", id + `.percentage.value: 1e-05 is refused by Istio: 0, or 0.0001 to 100`},
		{"{percentage: {value: 100}, exponentialDelay: 1s}", id + `.exponentialDelay: "1s" is refused by Istio ("exponentialDelay not supported yet"): use fixedDelay`},
		{"{percentage: {value: 100}, fixedDelay: 1s, exponentialDelay: 2s}", id + `: fixedDelay "1s" and exponentialDelay "2s" together, which Istio's CRD refuses (one of them)`},
	} {
		s := NewSet(Options{})
		_, err := s.AddManifest([]byte(vs("bookinfo", "ratings", "  http:\n  - fault: {delay: "+tc.delay+"}\n")))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: AddManifest error = %v\nwant %q", tc.delay, err, tc.want)
		}
		if got := s.Counts(); len(got) != 0 {
			t.Errorf("%s: an invalid object was added: %v", tc.delay, got)
		}
	}
}

// FuzzFaultDelay: any fixedDelay and share give a delay of 0 or the value as Istio reads it
// (whole milliseconds, at least 1ms) with its field named, or an error naming the object and
// field; never a negative delay. go test runs the seeds.
func FuzzFaultDelay(f *testing.F) {
	for _, s := range []string{"7s", "0s", "1.5s", "-1s", "1500us", "soon", "9999999999h", "1h1h", " 2s ", ""} {
		f.Add(s, 100.0, int64(0), false)
		f.Add(s, 0.0, int64(-5), true)
	}
	f.Add("3s", 0.00001, int64(101), false)
	f.Fuzz(func(t *testing.T, delay string, pct float64, percent int64, usePercent bool) {
		dl := &faultDelayFields{FixedDelay: &delay}
		if usePercent {
			dl.Percent = &percent
		} else {
			dl.Percentage = &struct {
				Value *float64 `json:"value"`
			}{Value: &pct}
		}
		fd, err := readDelay("VirtualService a/b", 2, dl)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "VirtualService a/b spec.http[2].fault.delay.") || fd != (faultDelay{}) {
				t.Fatalf("error %v with %+v", err, fd)
			}
			return
		}
		if fd.d < 0 || fd.d > 0 && (fd.d < time.Millisecond || fd.d%time.Millisecond != 0 || !strings.HasPrefix(fd.field, "spec.http[2].fault.delay.fixedDelay ")) {
			t.Fatalf("delay %+v", fd)
		}
	})
}
