package mesh

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// splitText is sp as one line: "app 1; <suggestion>; <layer>: <err>; carries 4, fits".
func splitText(sp EdgeSplit) string {
	parts := []string{fmt.Sprintf("app %d", sp.App)}
	for _, lf := range sp.Layers {
		if lf.Rewrite != nil {
			parts = append(parts, fmt.Sprintf("%s (asked %d, gives %d)", lf.Rewrite.Suggestion, lf.Tries, lf.Give))
		}
		if lf.Err != nil {
			parts = append(parts, lf.Err.Error())
		}
	}
	fit := "fits"
	if !sp.Fits {
		fit = "does not fit"
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; carries %d, %s, meshed %v", sp.Carries, fit, sp.Meshed)
}

func vsLayer(name string, tries int64) Layer {
	return Layer{Kind: Istio, Object: "VirtualService shop/" + name, FieldPath: "spec.http[0].retries.attempts", Tries: tries, Note: "VirtualService shop/" + name}
}

// ruleLayer is a Gateway API rule without retry under Istio (3 tries; its field's fewest is 2).
func ruleLayer(name string) Layer {
	return Layer{Kind: GAMMA, Object: "HTTPRoute shop/" + name, FieldPath: "spec.rules[0].retry", Tries: 3, Default: true, Unset: 3,
		Note: "Istio default, HTTPRoute shop/" + name + " spec.rules[0] sets no retry"}
}

func defaultLayer(host string) Layer {
	return Layer{Kind: Istio, Tries: 3, Default: true, Note: "Istio default, no VirtualService binds " + host}
}

// Split lowers as many layers as the planned value needs, in its stated order, and says so
// exactly; before, it lowered the largest layer only (the egress case: 2 x 3 = 6 > 4 left).
func TestSplitLayers(t *testing.T) {
	zero := " (" + IstioZeroAttemptsAlone + ")"
	cases := []struct {
		name    string
		app     int64
		layers  []Layer
		planned int64
		want    string
	}{
		{
			// The Gateway API egress case (istio-egress-gateway-http-gateway-api): both hops'
			// rules at their fewest, 2 x 2 = 4. Before: the sidecar's rule alone, 6 > 4.
			name: "two rules at their floors", app: 1, layers: []Layer{ruleLayer("direct"), ruleLayer("forward")}, planned: 4,
			want: "app 1; HTTPRoute shop/direct spec.rules[0].retry.attempts: unset (2) -> 1 (asked 2, gives 2); HTTPRoute shop/forward spec.rules[0].retry.attempts: unset (2) -> 1 (asked 2, gives 2); carries 4, fits, meshed true",
		},
		{
			name: "the annotation first, then the layer", app: 3, layers: []Layer{vsLayer("pay", 4)}, planned: 3,
			want: "app 1; VirtualService shop/pay spec.http[0].retries.attempts: 3 -> 2 (asked 3, gives 3); carries 3, fits, meshed true",
		},
		{
			name: "the annotation alone", app: 2, layers: []Layer{ruleLayer("pay")}, planned: 3,
			want: "app 1; carries 3, fits, meshed true",
		},
		{
			// The VirtualService does it alone; the rule could not (its fewest is 2).
			name: "one change where one does it", app: 1, layers: []Layer{ruleLayer("pay"), vsLayer("pay", 3)}, planned: 3,
			want: "app 1; VirtualService shop/pay spec.http[0].retries.attempts: 2 -> 0" + zero + " (asked 1, gives 1); carries 3, fits, meshed true",
		},
		{
			// Neither alone: the one that lowers the edge most first (3 x 1 = 3 before 2 x 3 = 6),
			// then the rule to 2.
			name: "two changes", app: 1, layers: []Layer{ruleLayer("pay"), vsLayer("pay", 3)}, planned: 2,
			want: "app 1; VirtualService shop/pay spec.http[0].retries.attempts: 2 -> 0" + zero + " (asked 1, gives 1); HTTPRoute shop/pay spec.rules[0].retry.attempts: unset (2) -> 1 (asked 2, gives 2); carries 2, fits, meshed true",
		},
		{
			// Of two that do it alone, the one that keeps the most tries (4 x 1, not 1 x 3).
			name: "keeps the most tries", app: 1, layers: []Layer{vsLayer("a", 4), vsLayer("b", 3)}, planned: 4,
			want: "app 1; VirtualService shop/b spec.http[0].retries.attempts: 2 -> 0" + zero + " (asked 1, gives 1); carries 4, fits, meshed true",
		},
		{
			name: "three layers, one change", app: 1, layers: []Layer{vsLayer("a", 5), vsLayer("b", 2), ruleLayer("c")}, planned: 8,
			want: "app 1; VirtualService shop/a spec.http[0].retries.attempts: 4 -> 0" + zero + " (asked 1, gives 1); carries 6, fits, meshed true",
		},
		{
			// A default no object declares is not the fix's to lower: the VirtualService is.
			name: "a default beside a field", app: 1, layers: []Layer{defaultLayer("pay"), vsLayer("pay", 3)}, planned: 3,
			want: "app 1; VirtualService shop/pay spec.http[0].retries.attempts: 2 -> 0" + zero + " (asked 1, gives 1); carries 3, fits, meshed true",
		},
		{
			// Every field at its fewest and still over: the default is named, with what to do.
			name: "no fit: a default left", app: 1, layers: []Layer{defaultLayer("pay"), vsLayer("pay", 3)}, planned: 2,
			want: "app 1; VirtualService shop/pay spec.http[0].retries.attempts: 2 -> 0" + zero + " (asked 1, gives 1); Istio default, no VirtualService binds pay: no object declares these 3 tries, the mesh's default: declare the retries on the callee (a VirtualService route with retries.attempts: 1), or lower the default of every route that sets none (MeshConfig defaultHttpRetryPolicy.attempts: 1, ConfigMap istio-system/istio data.mesh); carries 3, does not fit, meshed true",
		},
		{
			// A rule asked for 1 try gives 2 and says why, the edge left over.
			name: "no fit: a rule at its floor", app: 4, layers: []Layer{ruleLayer("pay")}, planned: 1,
			want: "app 1; HTTPRoute shop/pay spec.rules[0].retry.attempts: unset (2) -> 1 (asked 1, gives 2); Istio default, HTTPRoute shop/pay spec.rules[0] sets no retry: HTTPRoute shop/pay spec.rules[0].retry cannot give 1 try: the Gateway API CRD's retry.attempts is at least 1 (2 tries), and without retry the rule gets 3 tries; set HTTPRoute shop/pay spec.rules[0].retry.attempts: 1 (2 tries, its fewest), or raise the policy's spec.maxAmplification; carries 2, does not fit, meshed true",
		},
		{
			name: "not meshed", app: 3, layers: []Layer{vsLayer("pay", 1)}, planned: 2,
			want: "app 2; carries 2, fits, meshed false",
		},
	}
	for _, c := range cases {
		if got := splitText(Split(c.app, c.layers, c.planned)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// On random edges of 1-3 layers (VirtualService fields, Gateway API rules whose fewest is 2 or
// 1, defaults no object declares) and caller attempts, the split applied (the annotation's new
// value, each rewritten layer at what it gives) carries at most planned whenever the fewest the
// edge can carry (attempts 1, each field at its fewest, each default as it is) is at most
// planned; when it is not, the split says it does not fit and names a layer with why. It never
// raises a number.
func TestPropertySplitFitsWheneverAFitExists(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	fits, unfit := 0, 0
	for i := range 20000 {
		var layers []Layer
		for j := range 1 + r.IntN(3) {
			name := fmt.Sprintf("s%d", j)
			switch r.IntN(4) {
			case 0:
				layers = append(layers, vsLayer(name, int64(1+r.IntN(6))))
			case 1:
				layers = append(layers, ruleLayer(name))
			case 2:
				l := ruleLayer(name)
				l.Unset, l.Tries, l.Default = 1, int64(2+r.IntN(4)), false // attempts set; removing the block gives 1
				l.FieldPath = "spec.rules[0].retry.attempts"
				layers = append(layers, l)
			default:
				layers = append(layers, defaultLayer(name))
			}
		}
		app := int64(1 + r.IntN(4))
		planned := int64(1 + r.IntN(30))
		fewest, byHand := int64(1), int64(1)
		for _, l := range layers {
			if _, g, _ := LowestRewrite(l, 1); g < l.Tries {
				fewest *= g
				byHand *= g
			} else {
				fewest *= l.Tries
			}
		}
		if f, h := Fewest(layers); f != fewest || h != byHand {
			t.Fatalf("case %d: layers %v: Fewest %d, %d (by hand); want %d, %d", i, layers, f, h, fewest, byHand)
		}
		sp := Split(app, layers, planned)
		got := sp.App
		gives := map[int]int64{}
		for _, lf := range sp.Layers {
			k := -1
			for j, l := range layers {
				if l == lf.Layer {
					k = j
				}
			}
			if k < 0 || gives[k] != 0 {
				t.Fatalf("case %d: %s: layer %v is not one of the edge's, or twice", i, splitText(sp), lf.Layer)
			}
			if lf.Give > lf.Layer.Tries || (lf.Rewrite == nil) != (lf.Give == lf.Layer.Tries) {
				t.Fatalf("case %d: %s: layer %v gives %d", i, splitText(sp), lf.Layer, lf.Give)
			}
			gives[k] = lf.Give
		}
		meshed := false
		for j, l := range layers {
			g := l.Tries
			if v, ok := gives[j]; ok {
				g = v
			}
			meshed = meshed || l.Tries > 1
			got *= g
		}
		if !meshed {
			continue // the app's value alone is planned's
		}
		if sp.App > app || got != sp.Carries {
			t.Fatalf("case %d: app %d, layers %v, planned %d: %s: recomputed %d", i, app, layers, planned, splitText(sp), got)
		}
		if fewest <= planned {
			fits++
			if !sp.Fits || got > planned {
				t.Fatalf("case %d: app %d, layers %v, planned %d: fewest %d fits, but %s", i, app, layers, planned, fewest, splitText(sp))
			}
			continue
		}
		unfit++
		named := false
		for _, lf := range sp.Layers {
			named = named || lf.Err != nil
		}
		if sp.Fits || got <= planned || !named || got != fewest {
			t.Fatalf("case %d: app %d, layers %v, planned %d: fewest %d > planned, but %s", i, app, layers, planned, fewest, splitText(sp))
		}
	}
	if fits < 1000 || unfit < 1000 {
		t.Fatalf("%d fitting and %d unfit cases: the generator covers too little", fits, unfit)
	}
}
