package webhook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

// TestDecideMeshHugeObjects: lowerOnEdge lowered at most one field per MB of object (each field
// was a rewrite of the JSON read back into a Set): 200 routes all at attempts: 3 were "even
// attempts: 0 does not fit" under Reject (2 on every route fits) and Rewrite lowered 8 of them
// and admitted the object over the cap. Every route the edge weighs is lowered now.
func TestDecideMeshHugeObjects(t *testing.T) {
	const n = 200
	for _, o := range []struct {
		name, field string
		data        []byte
		pointer     func(i int) string
	}{
		{"VirtualService", "spec.http[0].retries.attempts", hugeVS(n, 3, 3), func(i int) string { return fmt.Sprintf("/spec/http/%d/retries/attempts", i) }},
		{"HTTPRoute", "spec.rules[0].retry.attempts", hugeRoute(n, 3, 3), func(i int) string { return fmt.Sprintf("/spec/rules/%d/retry/attempts", i) }},
	} {
		t.Run(o.name+" Reject", func(t *testing.T) {
			d := DecideMesh(hugeInput(t, v1alpha1.EnforcementReject, o.data))
			want := "RetryPolicy bookinfo/bookinfo: " + o.name + " bookinfo/ratings " + o.field + ": 3 makes productpage -x3-> reviews -x4-> ratings = 12 > cap 10; " +
				o.name + " bookinfo/ratings may keep attempts: 2"
			expectMeshDecision(t, d, MeshDecision{Message: want})
		})
		t.Run(o.name+" Rewrite", func(t *testing.T) {
			d := DecideMesh(hugeInput(t, v1alpha1.EnforcementRewrite, o.data))
			if !d.Allowed || len(d.Patch) != n+1 || len(d.Warnings) != 1 {
				t.Fatalf("allowed %v, %d operations (want %d), warnings %.400q", d.Allowed, len(d.Patch), n+1, d.Warnings)
			}
			var ptrs, from []string
			for i := range n {
				ptrs = append(ptrs, o.pointer(i))
			}
			slices.Sort(ptrs) // pointer order, as the annotation lists them
			for _, p := range ptrs {
				from = append(from, pointerToPath(p)+": 3")
			}
			if d.Patch[0].Operation != "add" || d.Patch[0].Path != "/metadata/annotations" {
				t.Fatalf("first operation %+v", d.Patch[0])
			}
			ann, _ := d.Patch[0].Value.(map[string]any)
			if got := ann["retrycap.dev/rewritten-from"]; got != strings.Join(from, "; ") {
				t.Errorf("rewritten-from = %.200q...", got)
			}
			for i, op := range d.Patch[1:] {
				if op.Operation != "replace" || !strings.HasSuffix(op.Path, "/attempts") || op.Value != float64(2) {
					t.Fatalf("operation %d: %+v", i+1, op)
				}
			}
			if !strings.HasPrefix(d.Warnings[0], "RetryPolicy bookinfo/bookinfo rewrote "+o.name+" bookinfo/ratings: ") ||
				!strings.HasSuffix(d.Warnings[0], " (productpage -x3-> reviews -x4-> ratings = 12 > cap 10)") ||
				strings.Count(d.Warnings[0], ": 3 -> 2") != n {
				t.Errorf("warning %.300q", d.Warnings[0])
			}
			// What is stored passes again, unchanged.
			stored := applyAddReplace(t, o.data, d.Patch)
			expectMeshDecision(t, DecideMesh(hugeInput(t, v1alpha1.EnforcementRewrite, stored)), MeshDecision{Allowed: true})
		})
	}
}

// refLowerOnEdge is lowerOnEdge as it was (commit 4c135aa) without its bound on fields: lower
// the named field in the JSON, read the object back into a Set, build, and go on with the
// object's layer that then carries the edge. The reference of the differential test below.
func refLowerOnEdge(p judgedPolicy, obj meshObject, oldSet *mesh.Set, raw []byte, e raised, tries int64) ([]byte, bool) {
	l, cur := e.layer, raw
	for range 10000 {
		rw, err := mesh.PlanRewrite(l, tries)
		if err != nil {
			return nil, false
		}
		out, err := rw.Apply(cur)
		if err != nil {
			return nil, false
		}
		s, err := withObject(oldSet, obj, out)
		if err != nil {
			return nil, false
		}
		next, on := layerOnEdge(p.build(s), obj, e)
		if !on || next.Tries <= tries {
			return out, true
		}
		if next.FieldPath == l.FieldPath {
			return nil, false
		}
		l, cur = next, out
	}
	return nil, false
}

// randomMeshObject is a VirtualService (hosts ratings and maybe reviews, maybe exported to
// bookinfo alone, maybe bound to an ingress gateway too) or a GAMMA HTTPRoute for ratings, with
// up to 12 routes of random retries: none, an empty block, or attempts 0-5 (1-5 on a route);
// some routes only for an ingress gateway.
func randomMeshObject(r *rand.Rand) []byte {
	retry := func(key string) string {
		switch r.IntN(4) {
		case 0:
			return ""
		case 1:
			return `,"` + key + `":{}`
		}
		if key == "retry" {
			return fmt.Sprintf(`,"%s":{"attempts":%d}`, key, 1+r.IntN(5)) // the CRD's minimum 1
		}
		return fmt.Sprintf(`,"%s":{"attempts":%d}`, key, r.IntN(6))
	}
	n := 1 + r.IntN(12)
	var b strings.Builder
	switch r.IntN(6) {
	case 0:
		return randomEntryObject(r, false)
	case 1:
		return randomEntryObject(r, true)
	}
	if r.IntN(3) == 0 {
		b.WriteString(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"ratings","namespace":"bookinfo"},"spec":{"parentRefs":[{"group":"","kind":"Service","name":"ratings"}],"rules":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"backendRefs":[{"name":"ratings","port":9080}]` + retry("retry") + `}`)
		}
		b.WriteString(`]}}`)
		return []byte(b.String())
	}
	hosts := `["ratings"]`
	if r.IntN(3) == 0 {
		hosts = `["ratings","reviews"]`
	}
	gateways := ""
	if r.IntN(3) == 0 {
		gateways = `,"gateways":["mesh","bookinfo-gateway"]`
	}
	export := ""
	if r.IntN(4) == 0 {
		export = `,"exportTo":["."]`
	}
	fmt.Fprintf(&b, `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"ratings","namespace":"bookinfo"},"spec":{"hosts":%s%s%s,"http":[`, hosts, gateways, export)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		match := ""
		if gateways != "" && r.IntN(3) == 0 {
			match = `"match":[{"gateways":["bookinfo-gateway"]}],`
		}
		b.WriteString(`{` + match + `"route":[{"destination":{"host":"ratings"}}]` + retry("retries") + `}`)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// randomEntryObject is a north-south object to bookinfo's entrypoint productpage: a
// VirtualService bound to ingress Gateway bookinfo-gateway (ingress) or an HTTPRoute with a
// Gateway parentRef, of up to 20 routes (16 rules: the HTTPRoute CRD's most; the gate lowered
// them one per round, at most 8) to productpage, reviews or both, with random retries (none, an
// empty block, attempts 0-5, 1-5 on a route).
func randomEntryObject(r *rand.Rand, ingress bool) []byte {
	n := 1 + r.IntN(20)
	if !ingress {
		n = 1 + r.IntN(16)
	}
	backends := []string{`"productpage"`, `"productpage"`, `"reviews"`, `"productpage","reviews"`}
	var b strings.Builder
	if ingress {
		b.WriteString(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"front","namespace":"bookinfo"},"spec":{"hosts":["bookinfo.example.com"],"gateways":["bookinfo-gateway"],"http":[`)
	} else {
		b.WriteString(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"web","namespace":"bookinfo"},"spec":{"parentRefs":[{"name":"bookinfo-gateway"}],"rules":[`)
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		var dest []string
		for _, h := range strings.Split(backends[r.IntN(len(backends))], ",") {
			if ingress {
				dest = append(dest, `{"destination":{"host":`+h+`}}`)
			} else {
				dest = append(dest, `{"name":`+h+`,"port":9080}`)
			}
		}
		retry := ""
		switch k := r.IntN(4); {
		case k == 1 && ingress:
			retry = `,"retries":{}`
		case k == 1:
			retry = `,"retry":{}`
		case k >= 2 && ingress:
			retry = fmt.Sprintf(`,"retries":{"attempts":%d}`, r.IntN(6))
		case k >= 2:
			retry = fmt.Sprintf(`,"retry":{"attempts":%d}`, 1+r.IntN(5)) // the CRD's minimum 1
		}
		if ingress {
			b.WriteString(`{"route":[` + strings.Join(dest, ",") + `]` + retry + `}`)
		} else {
			b.WriteString(`{"backendRefs":[` + strings.Join(dest, ",") + `]` + retry + `}`)
		}
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// TestLowerOnEdgeDifferential: on random objects, every raised edge and every target, the
// rewrites lowerOnEdge plans (on the Set's decoded objects, siblings at once) give the object
// refLowerOnEdge gives (field by field in the JSON), and the same verdict.
func TestLowerOnEdgeDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 31))
	checked, entries := 0, 0
	for range 300 {
		raw := randomMeshObject(r)
		in := hugeInput(t, v1alpha1.EnforcementRewrite, raw)
		obj, oldSet, set, err := meshSets(in.Set, raw, nil)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		for _, p := range in.judged(MeshBearsOn(obj.namespace, raw, nil)) {
			for _, e := range layered(p.build(set), p.build(oldSet), obj) {
				for tries := int64(1); tries < e.layer.Tries; tries++ {
					want, wantOK := refLowerOnEdge(p, obj, oldSet, raw, e.raised, tries)
					rws, _, _, ok := lowerOnEdge(p, obj, set, constJSON(raw), e.raised, tries)
					if ok != wantOK {
						t.Fatalf("%s\nedge %s->%s to %d tries: ok %v, the reference %v", raw, e.from, e.to, tries, ok, wantOK)
					}
					if !ok {
						continue
					}
					doc, err := mesh.NewDoc(raw)
					if err != nil {
						t.Fatal(err)
					}
					for _, rw := range rws {
						if err := doc.Apply(rw); err != nil {
							t.Fatal(err)
						}
					}
					got, _ := doc.Bytes()
					if !sameJSON(t, got, want) {
						t.Fatalf("%s\nedge %s->%s to %d tries:\n got %s\nwant %s", raw, e.from, e.to, tries, got, want)
					}
					checked++
					if e.from == "" {
						entries++
					}
				}
			}
		}
	}
	if checked < 300 || entries < 100 {
		t.Fatalf("only %d lowerings compared, %d of them at an entrypoint", checked, entries)
	}
	t.Logf("%d lowerings compared, %d of them at an entrypoint", checked, entries)
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(ax) == string(by)
}

// TestDecideMeshHugeRewrittenFrom: 10,000 lowered routes are 370 KB of old values, past the
// API's 256 KiB of annotations: the rewritten object was refused ("Too long"). The annotation
// keeps the fields that fit, cut after a whole one.
func TestDecideMeshHugeRewrittenFrom(t *testing.T) {
	const n = 10000
	d := DecideMesh(hugeInput(t, v1alpha1.EnforcementRewrite, hugeVS(n, 3, 3)))
	if !d.Allowed || len(d.Patch) != n+1 || d.Patch[0].Path != "/metadata/annotations" {
		t.Fatalf("allowed %v, %d operations", d.Allowed, len(d.Patch))
	}
	from := d.Patch[0].Value.(map[string]any)["retrycap.dev/rewritten-from"].(string)
	var ptrs []string
	for i := range n {
		ptrs = append(ptrs, fmt.Sprintf("/spec/http/%d/retries/attempts", i))
	}
	slices.Sort(ptrs)
	var fields []string
	for _, p := range ptrs {
		fields = append(fields, pointerToPath(p)+": 3")
	}
	whole := strings.Join(fields, "; ")
	tail := fmt.Sprintf("... (truncated from %d bytes)", len(whole))
	// The most whole fields that fit with the tail beside the key in 256 KiB.
	k, size := 0, -2
	for k < len(fields) && size+2+len(fields[k])+len(tail)+len("retrycap.dev/rewritten-from") < 256<<10 {
		size += 2 + len(fields[k])
		k++
	}
	kept := strings.Join(fields[:k], "; ")
	if want := kept + tail; from != want {
		t.Errorf("rewritten-from: %d bytes, ending %q, want %d bytes ending %q", len(from), from[max(len(from)-120, 0):], len(want), want[len(want)-120:])
	}
}

// TestDecideMeshTooManyRoutes: past MaxMeshRoutes the object is refused with its count under an
// enforcing policy and admitted with a warning under Audit alone (50,000 minimal routes, 1.35 MB,
// took 1.8 s to rewrite on a loaded machine; the webhook's 5 s run out admits it unjudged).
func TestDecideMeshTooManyRoutes(t *testing.T) {
	minimal := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"ratings","namespace":"bookinfo"},"spec":{"hosts":["ratings"],"http":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"retries":{"attempts":1}}`)
		}
		b.WriteString(`]}}`)
		return []byte(b.String())
	}
	over := "VirtualService bookinfo/ratings has 10001 routes: retrycap judges mesh objects of at most 10000 (the webhook's 5 s would run out, and the object be admitted unjudged); split its routes across objects"
	for _, c := range []struct {
		mode v1alpha1.Enforcement
		n    int
		want MeshDecision
	}{
		{v1alpha1.EnforcementReject, 10001, MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: " + over}},
		{v1alpha1.EnforcementRewrite, 10001, MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: " + over}},
		{v1alpha1.EnforcementAudit, 10001, MeshDecision{Allowed: true, Warnings: []string{over + " (admitted unjudged: every policy it bears on is Audit)"}}},
		// At the bound it is judged: attempts 1 raises nothing.
		{v1alpha1.EnforcementReject, 10000, MeshDecision{Allowed: true}},
	} {
		t.Run(fmt.Sprintf("%s %d", c.mode, c.n), func(t *testing.T) {
			expectMeshDecision(t, DecideMesh(hugeInput(t, c.mode, minimal(c.n))), c.want)
		})
	}
}
