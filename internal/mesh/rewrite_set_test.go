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
			item = fmt.Sprintf(`"name":"r%d","route":[{"destination":{"host":"a"}}],"timeout":"5s"`, i)
		}
		path := fmt.Sprintf("spec.%s[%d].%s", list, i, block)
		switch r.IntN(5) {
		case 0:
			layers = append(layers, Layer{Kind: Istio, Object: id, FieldPath: path, Tries: 3, Default: true})
		case 1:
			item += `,"` + block + `":null`
			layers = append(layers, Layer{Kind: Istio, Object: id, FieldPath: path, Tries: 3, Default: true})
		case 2:
			item += `,"` + block + `":{"perTryTimeout":"1s"}`
			layers = append(layers, Layer{Kind: GAMMA, Object: id, FieldPath: path + ".attempts", Tries: 3, Default: true})
		default:
			a := r.IntN(7)
			if group == GroupGateway {
				a = 1 + r.IntN(6) // the CRD's minimum 1
			}
			item += fmt.Sprintf(`,"%s":{"attempts":%d,"perTryTimeout":"1s","retryOn":"5xx"}`, block, a)
			layers = append(layers, Layer{Kind: Istio, Object: id, FieldPath: path + ".attempts", Tries: int64(a) + 1})
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
		if l.Tries < 2 || r.IntN(3) == 0 {
			continue
		}
		tries := 1 + r.Int64N(l.Tries-1)
		plan := PlanRewrite
		if tries == 1 && gatewayAPIRetry(l) {
			// PlanRewrite refuses it (TestPlanRewriteRefuses); a rewrite built past that check
			// must still be refused by Lowered and by AddJSON alike.
			plan = planField
		}
		rw, err := plan(l, tries)
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
	compared, refused := 0, 0
	for range 500 {
		data, group, layers := randomRetryObject(r)
		rws := plannedRewrites(t, r, layers)
		if len(rws) == 0 {
			continue
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
		want := NewSet(Options{})
		if _, err := want.AddJSON(out); err != nil || !ok {
			// Refused by both: a Gateway API route at attempts 0 (the CRD's minimum is 1).
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
	if compared < 300 || refused == 0 {
		t.Fatalf("only %d compared, %d refused by both", compared, refused)
	}
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
