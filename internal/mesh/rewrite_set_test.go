package mesh

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
)

// randomRetryObject is a VirtualService or a Gateway API / Linkerd HTTPRoute of up to 10 routes
// with random retries (none, null, an empty block, attempts 0-6, a per-try timeout beside them)
// and random other fields, and the layers of its retry fields.
func randomRetryObject(r *rand.Rand) ([]byte, string, []Layer) {
	n := 1 + r.IntN(10)
	var items []string
	var layers []Layer
	vs := r.IntN(2) == 0
	group, kind, list, block := GroupIstio, "VirtualService", "http", "retries"
	if !vs {
		group, kind, list, block = GroupGateway, "HTTPRoute", "rules", "retry"
		if r.IntN(3) == 0 {
			group = GroupLinkerdPol
		}
	}
	id := kind + " shop/x"
	for i := range n {
		item := fmt.Sprintf(`"name":"r%d","backendRefs":[{"name":"a"}]`, i)
		if vs {
			// A route timeout longer than the per-try timeout, shorter, or none: a lowering to
			// attempts 0 bounds the route by the per-try timeout where it was longer or unset.
			item = fmt.Sprintf(`"name":"r%d","route":[{"destination":{"host":"a"}}]%s`, i, []string{`,"timeout":"5s"`, `,"timeout":"500ms"`, ""}[r.IntN(3)])
		}
		path := fmt.Sprintf("spec.%s[%d].%s", list, i, block)
		// A route rule's tries without its retry block: Istio's default (3), or 1 (Linkerd, a
		// Gateway no BackendTrafficPolicy covers), where 1 try removes the block.
		unset := int64(0)
		if !vs {
			unset = []int64{1, 3}[r.IntN(2)]
		}
		extra := []string{`"perTryTimeout":"1s"`, `"perTryTimeout":"1s","retryRemoteLocalities":false,"backoff":"30ms"`}[r.IntN(2)]
		if !vs {
			extra = `"backoff":"100ms","codes":[503]` // the block's backoff goes with it
		}
		switch r.IntN(5) {
		case 0:
			layers = append(layers, Layer{Kind: Istio, Object: id, FieldPath: path, Tries: 3, Default: true, Unset: 3 * min(unset, 1)})
		case 1:
			item += `,"` + block + `":null`
			layers = append(layers, Layer{Kind: Istio, Object: id, FieldPath: path, Tries: 3, Default: true, Unset: 3 * min(unset, 1)})
		case 2:
			item += `,"` + block + `":{` + extra + `}`
			layers = append(layers, Layer{Kind: GAMMA, Object: id, FieldPath: path + ".attempts", Tries: 3, Default: true, Unset: unset})
		default:
			a := r.IntN(7)
			if group == GroupGateway {
				a = 1 + r.IntN(6) // the CRD's minimum 1
			}
			item += fmt.Sprintf(`,"%s":{"attempts":%d,%s,"retryOn":"5xx"}`, block, a, extra)
			layers = append(layers, Layer{Kind: Istio, Object: id, FieldPath: path + ".attempts", Tries: int64(a) + 1, Unset: unset})
		}
		items = append(items, "{"+item+"}")
	}
	data := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"%s","metadata":{"name":"x","namespace":"shop","labels":{"a":"b"}},"spec":{"hosts":["a"],"parentRefs":[{"kind":"Service","name":"a"}],"%s":[%s]}}`,
		group, kind, list, strings.Join(items, ","))
	if !vs {
		data = strings.Replace(data, `"hosts":["a"],`, "", 1)
	} else {
		data = strings.Replace(data, `"parentRefs":[{"kind":"Service","name":"a"}],`, "", 1)
	}
	return []byte(data), group, layers
}

// plannedRewrites plans a random subset of the layers lowered to a random target below them.
func plannedRewrites(t *testing.T, r *rand.Rand, layers []Layer) []*Rewrite {
	var rws []*Rewrite
	for _, l := range layers {
		floor := MinTries(l) // 2 for a rule whose block's removal would not give 1
		if l.Tries <= floor || r.IntN(3) == 0 {
			continue
		}
		rw, err := PlanRewrite(l, floor+r.Int64N(l.Tries-floor))
		if err != nil {
			t.Fatal(err)
		}
		rws = append(rws, rw)
	}
	return rws
}

// TestLoweredDifferential: the Set Lowered gives holds what AddJSON of the rewritten JSON gives,
// and Lowered refuses what AddJSON refuses.
func TestLoweredDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	compared, refused, removed := 0, 0, 0
	for range 500 {
		data, group, layers := randomRetryObject(r)
		rws := plannedRewrites(t, r, layers)
		if len(rws) == 0 {
			continue
		}
		for _, rw := range rws {
			if rw.remove {
				removed++
			}
		}
		base := NewSet(Options{})
		if _, err := base.AddJSON(data); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		got, ok := base.Lowered(group, rws)
		out := data
		for _, rw := range rws {
			var err error
			if out, err = rw.Apply(out); err != nil {
				t.Fatal(err)
			}
		}
		if group == GroupIstio {
			if err := istioRetriesValid(out, rws); err != nil {
				t.Fatalf("%s\nrewritten to %s: %v", data, out, err)
			}
		}
		want := NewSet(Options{})
		if _, err := want.AddJSON(out); err != nil || !ok {
			// Refused by both (PlanRewrite no longer plans a Gateway API route's attempts: 0).
			if err == nil || ok {
				t.Fatalf("%s\nrewritten to %s: Lowered ok %v, AddJSON error %v", data, out, ok, err)
			}
			refused++
			continue
		}
		got.idx, want.idx = nil, nil
		if !reflect.DeepEqual(got.virtualServices, want.virtualServices) || !reflect.DeepEqual(got.routes, want.routes) || !reflect.DeepEqual(got.times, want.times) {
			t.Fatalf("%s\nrewritten to %s:\nLowered differs from AddJSON", data, out)
		}
		if !reflect.DeepEqual(base.virtualServices, mustSet(t, data).virtualServices) || !reflect.DeepEqual(base.routes, mustSet(t, data).routes) {
			t.Fatalf("%s: Lowered changed the Set it was given", data)
		}
		compared++
	}
	if compared < 300 || removed < 30 {
		t.Fatalf("only %d compared (%d refused by both), %d rule retry blocks removed", compared, refused, removed)
	}
	t.Logf("%d compared, %d refused by both, %d rule retry blocks removed", compared, refused, removed)
}

// istioRetriesValid is what Istio's validation (ValidateHTTPRetry) says of a VirtualService's
// retries blocks: attempts 0 (or unset beside them) with perTryTimeout, retryOn or
// retryRemoteLocalities is refused ("http retry policy configured when attempts are set to 0").
// Only the routes rws rewrote are looked at: the random input may hold such blocks itself.
func istioRetriesValid(data []byte, rws []*Rewrite) error {
	var vs struct {
		Spec struct {
			HTTP []struct {
				Retries map[string]any `json:"retries"`
			} `json:"http"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &vs); err != nil {
		return err
	}
	for _, rw := range rws {
		i := rw.path[2].(int)
		h := vs.Spec.HTTP[i]
		if h.Retries == nil {
			return fmt.Errorf("spec.http[%d]: no retries after %s", i, rw.Suggestion)
		}
		if a, _ := h.Retries["attempts"].(float64); a != 0 {
			continue
		}
		for _, k := range []string{"perTryTimeout", "retryOn", "retryRemoteLocalities"} {
			if _, ok := h.Retries[k]; ok {
				return fmt.Errorf("spec.http[%d].retries: %s beside attempts 0: Istio refuses it", i, k)
			}
		}
	}
	return nil
}

// TestLoweredRefuses: a rewrite planned from another value, a field Lowered does not judge, or an
// object not in the Set is refused (the caller applies it to the JSON, which says why).
func TestLoweredRefuses(t *testing.T) {
	data := []byte(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"x","namespace":"shop"},"spec":{"hosts":["a"],"http":[{"retries":{"attempts":3}}]}}`)
	s := mustSet(t, data)
	stale, _ := PlanRewrite(Layer{Kind: Istio, Object: "VirtualService shop/x", FieldPath: "spec.http[0].retries.attempts", Tries: 5}, 2)
	other, _ := PlanRewrite(Layer{Kind: Istio, Object: "VirtualService shop/y", FieldPath: "spec.http[0].retries.attempts", Tries: 4}, 2)
	beyond, _ := PlanRewrite(Layer{Kind: Istio, Object: "VirtualService shop/x", FieldPath: "spec.http[3].retries.attempts", Tries: 4}, 2)
	linkerd, _ := PlanRewrite(Layer{Kind: Linkerd, Object: "Service shop/a", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 4}, 2)
	for name, rws := range map[string][]*Rewrite{"stale": {stale}, "other object": {other}, "no such route": {beyond}, "annotation": {linkerd}, "none": nil} {
		if _, ok := s.Lowered(GroupIstio, rws); ok {
			t.Errorf("%s: Lowered accepted it", name)
		}
	}
}

func mustSet(t *testing.T, data []byte) *Set {
	t.Helper()
	s := NewSet(Options{})
	if _, err := s.AddJSON(data); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDocPatchDifferential: Doc's patch, computed over the touched subtrees, is
// jsonpatch.CreatePatch of the whole object before and after (the mesh gate's patch as it was),
// with and without the annotation, and Original reads the values as given.
func TestDocPatchDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 7))
	for i := range 500 {
		data, _, layers := randomRetryObject(r)
		if i%4 == 0 {
			// Annotations already there, or Linkerd's, which a rewrite removes.
			data = []byte(strings.Replace(string(data), `"labels":{"a":"b"}`, `"annotations":{"retry.linkerd.io/http":"5xx","retry.linkerd.io/limit":"4","other":"x~/y"}`, 1))
			l := Layer{Kind: Linkerd, Object: "x", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 5}
			layers = append(layers, l)
		}
		rws := plannedRewrites(t, r, layers)
		doc, err := NewDoc(data)
		if err != nil {
			t.Fatal(err)
		}
		out := data
		for _, rw := range rws {
			if err := doc.Apply(rw); err != nil {
				t.Fatal(err)
			}
			if out, err = rw.Apply(out); err != nil {
				t.Fatal(err)
			}
		}
		expectSamePatch(t, doc, data, out)
		for _, op := range mustPatch(t, doc) {
			got, gotOK := doc.Original(op.Path)
			var whole any
			_ = json.Unmarshal(data, &whole)
			want, wantOK := follow(whole, pointerTokens(op.Path))
			if gotOK != wantOK || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: Original(%s) = %v %v, want %v %v", data, op.Path, got, gotOK, want, wantOK)
			}
		}
		if err := doc.SetAnnotation("retrycap.dev/rewritten-from", "a; b"); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		md := m["metadata"].(map[string]any)
		if md["annotations"] == nil {
			md["annotations"] = map[string]any{}
		}
		md["annotations"].(map[string]any)["retrycap.dev/rewritten-from"] = "a; b"
		final, _ := json.Marshal(m)
		expectSamePatch(t, doc, data, final)
		got, _ := doc.Bytes()
		var a, b any
		_ = json.Unmarshal(got, &a)
		_ = json.Unmarshal(final, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Bytes = %s\nwant %s", got, final)
		}
	}
}

func mustPatch(t *testing.T, d *Doc) []jsonpatch.Operation {
	t.Helper()
	ops, err := d.Patch()
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func expectSamePatch(t *testing.T, d *Doc, before, after []byte) {
	t.Helper()
	got := mustPatch(t, d)
	want, err := jsonpatch.CreatePatch(before, after)
	if err != nil {
		t.Fatal(err)
	}
	sortOps := func(ops []jsonpatch.Operation) string {
		sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
		data, _ := json.Marshal(ops)
		return string(data)
	}
	if g, w := sortOps(got), sortOps(want); g != w {
		t.Fatalf("%s\npatch %s\nwant  %s", before, g, w)
	}
}

// TestEntrySiblings: the layers of an ingress VirtualService and of a Gateway-parented route that
// weigh on one backend's client attempts are every route of the object to that backend (they
// were lowered one per round, and an edge of more than 8 did not fit), not the routes to other
// backends, nor a rule a BackendTrafficPolicy covers (that object's layer).
func TestEntrySiblings(t *testing.T) {
	docs := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: shop}
spec:
  hosts: [shop.example.com]
  gateways: [gw]
  http:
  - route: [{destination: {host: productpage}}]
    retries: {attempts: 3}
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 4}
  - route: [{destination: {host: productpage}}]
  - match: [{gateways: [mesh]}]
    route: [{destination: {host: productpage}}]
    retries: {attempts: 5}
  - route: [{destination: {host: reviews}}, {destination: {host: productpage}}]
    retries: {attempts: 1}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: eg}]
  rules:
  - backendRefs: [{name: productpage}]
    retry: {attempts: 2}
  - backendRefs: [{name: reviews}]
    retry: {attempts: 6}
  - backendRefs: [{name: productpage}, {name: reviews}]
    retry: {}
  - backendRefs: [{name: productpage}]
`
	s := set(t, Options{}, docs)
	show := func(ls []Layer) string {
		var out []string
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%s %s %s %d unset %d", l.Kind, l.Object, l.FieldPath, l.Tries, l.Unset))
		}
		return strings.Join(out, "; ")
	}
	pp, rv := ServiceRef{"shop", "productpage"}, ServiceRef{"shop", "reviews"}
	vsL := Layer{Kind: IstioIngress, Object: "VirtualService shop/front", FieldPath: "spec.http[0].retries.attempts", Tries: 4}
	rtL := Layer{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 3}
	for _, c := range []struct {
		group string
		l     Layer
		v     ServiceRef
		want  string
	}{
		{GroupIstio, vsL, pp, "IstioIngress VirtualService shop/front spec.http[0].retries.attempts 4 unset 0; " +
			"IstioIngress VirtualService shop/front spec.http[2].retries 3 unset 0; " +
			"IstioIngress VirtualService shop/front spec.http[4].retries.attempts 2 unset 0"},
		{GroupIstio, vsL, rv, "IstioIngress VirtualService shop/front spec.http[1].retries.attempts 5 unset 0; " +
			"IstioIngress VirtualService shop/front spec.http[4].retries.attempts 2 unset 0"},
		{GroupGateway, rtL, pp, "Gateway HTTPRoute shop/web spec.rules[0].retry.attempts 3 unset 1; " +
			"Gateway HTTPRoute shop/web spec.rules[2].retry.attempts 3 unset 1; " +
			"Gateway HTTPRoute shop/web spec.rules[3].retry 1 unset 1"},
		{GroupGateway, rtL, rv, "Gateway HTTPRoute shop/web spec.rules[1].retry.attempts 7 unset 1; " +
			"Gateway HTTPRoute shop/web spec.rules[2].retry.attempts 3 unset 1"},
	} {
		if got := show(s.EntrySiblings(c.group, c.l, c.v)); got != c.want {
			t.Errorf("%s at %s:\n got %s\nwant %s", c.l.Object, c.v, got, c.want)
		}
	}
	// Every sibling is a layer Entry weighs: the largest of both objects' is Entry's.
	if got, want := show(s.Entry(rv).Layers), "Gateway HTTPRoute shop/web spec.rules[1].retry.attempts 7 unset 1"; got != want {
		t.Errorf("Entry(reviews) = %s, want %s", got, want)
	}
	// A BackendTrafficPolicy on the route: the rule without retry is its layer, and the others'
	// blocks removed give its 5 tries.
	if _, err := s.AddManifest([]byte(btp("shop", "p", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  retry: {numRetries: 4}"))); err != nil {
		t.Fatal(err)
	}
	want := "Gateway HTTPRoute shop/web spec.rules[0].retry.attempts 3 unset 5; Gateway HTTPRoute shop/web spec.rules[2].retry.attempts 3 unset 5"
	if got := show(s.EntrySiblings(GroupGateway, rtL, pp)); got != want {
		t.Errorf("with a BackendTrafficPolicy:\n got %s\nwant %s", got, want)
	}
}
