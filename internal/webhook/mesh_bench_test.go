package webhook

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

// The mesh gate's cost on huge objects (docs/benchmarks.md, "The mesh gate on huge objects"):
// a VirtualService of 10,000 routes (1.1 MB) and an HTTPRoute of 10,000 rules, all to ratings
// with 3 attempts, judged under cap 10 on bookinfo (productpage -> reviews -> ratings). The
// anchor is decoding the object alone, once, with encoding/json (the library the gate reads it
// with): what any judgement of the object costs at least.
//
//	go test ./internal/webhook -run '^$' -bench 'MeshHuge' -benchmem -count 3

// hugeVS is a VirtualService for ratings with n http routes (a prefix match each, the last one
// the default), each retries.attempts: attempts and a timeout.
func hugeVS(n int, first, attempts int) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"ratings","namespace":"bookinfo"},"spec":{"hosts":["ratings"],"http":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < n-1 {
			fmt.Fprintf(&b, `{"name":"route-%d","match":[{"uri":{"prefix":"/v%d/"}}],`, i, i)
		} else {
			fmt.Fprintf(&b, `{"name":"route-%d",`, i)
		}
		a := attempts
		if i == 0 {
			a = first
		}
		fmt.Fprintf(&b, `"route":[{"destination":{"host":"ratings","subset":"v1"}}],"timeout":"10s","retries":{"attempts":%d,"perTryTimeout":"2s","retryOn":"5xx,reset"}}`, a)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// hugeRoute is a GAMMA HTTPRoute (parentRef: Service ratings) with n rules, each
// retry.attempts: attempts.
func hugeRoute(n int, first, attempts int) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"ratings","namespace":"bookinfo"},"spec":{"parentRefs":[{"group":"","kind":"Service","name":"ratings","port":9080}],"rules":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		a := attempts
		if i == 0 {
			a = first
		}
		fmt.Fprintf(&b, `{"matches":[{"path":{"type":"PathPrefix","value":"/v%d/"}}],"backendRefs":[{"name":"ratings","port":9080}],"timeouts":{"request":"10s"},"retry":{"attempts":%d,"codes":[503]}}`, i, a)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// hugeInput is the mesh gate's input for object on bookinfo in Istio, one policy of cap 10.
func hugeInput(tb testing.TB, mode v1alpha1.Enforcement, object []byte) MeshInput {
	tb.Helper()
	set := mesh.NewSet(mesh.Options{})
	if _, err := set.AddManifest([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, labels: {istio-injection: enabled}}")); err != nil {
		tb.Fatal(err)
	}
	return MeshInput{Policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, mode)}, Workloads: bookinfoChain(), Set: set, Object: object}
}

func benchHuge(b *testing.B, object []byte, check func(b *testing.B, d MeshDecision), mode v1alpha1.Enforcement) {
	in := hugeInput(b, mode, object)
	check(b, DecideMesh(in))
	b.SetBytes(int64(len(object)))
	b.ReportAllocs()
	for b.Loop() {
		DecideMesh(in)
	}
}

func BenchmarkMeshHuge(b *testing.B) {
	const n = 10000
	// "one": route 0 has attempts 3, the others 1 (one field to lower); "all": every route
	// has attempts 3 (every field on the edge is lowered); "huge": every route has attempts
	// 2^31-1, the most Istio's int32 allows (a bisection over 2^31 values, were it not bounded
	// by the cap; it was 2^40, which the reader refuses since attempts are read within their
	// CRD's bounds, so the case failed before judging anything).
	const huge = 1<<31 - 1
	objects := []struct {
		name     string
		data     []byte
		field    string
		attempts int
		ops      int
	}{
		{"VirtualService/one", hugeVS(n, 3, 1), "spec.http[0].retries.attempts", 3, 2},
		{"VirtualService/all", hugeVS(n, 3, 3), "spec.http[0].retries.attempts", 3, n + 1},
		{"VirtualService/huge", hugeVS(n, huge, huge), "spec.http[0].retries.attempts", huge, n + 1},
		{"HTTPRoute/one", hugeRoute(n, 3, 1), "spec.rules[0].retry.attempts", 3, 2},
		{"HTTPRoute/all", hugeRoute(n, 3, 3), "spec.rules[0].retry.attempts", 3, n + 1},
	}
	for _, o := range objects {
		b.Run(o.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(o.data)))
			b.ReportAllocs()
			for b.Loop() {
				var doc any
				if err := json.Unmarshal(o.data, &doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(o.name+"/Reject", func(b *testing.B) {
			benchHuge(b, o.data, func(b *testing.B, d MeshDecision) {
				if d.Allowed || !strings.Contains(d.Message, fmt.Sprintf("%s: %d makes", o.field, o.attempts)) || !strings.HasSuffix(d.Message, "may keep attempts: 2") {
					b.Fatalf("Reject: %+v", d)
				}
			}, v1alpha1.EnforcementReject)
		})
		b.Run(o.name+"/Rewrite", func(b *testing.B) {
			benchHuge(b, o.data, func(b *testing.B, d MeshDecision) {
				// Every route over is lowered, and the annotation added.
				if !d.Allowed || len(d.Patch) != o.ops || len(d.Warnings) != 1 {
					b.Fatalf("Rewrite: allowed %v, %d operations, warnings %.300q", d.Allowed, len(d.Patch), d.Warnings)
				}
			}, v1alpha1.EnforcementRewrite)
		})
	}
}
