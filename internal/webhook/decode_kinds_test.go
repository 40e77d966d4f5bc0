package webhook

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/internal/gate"
)

// TestDecodeWorkloadKinds reads each kind's pod template from its own path (a CronJob's
// spec.jobTemplate.spec.template, never its absent spec.template), lets a CronJob's Job and a
// Deployment's ReplicaSet through as no workload, and ignores a kind of the same name in another
// group.
func TestDecodeWorkloadKinds(t *testing.T) {
	owner := `"ownerReferences":[{"apiVersion":"batch/v1","kind":"CronJob","name":"nightly","uid":"1","controller":true}]`
	tmpl := `{"metadata":{"labels":{"app":"nightly"},"annotations":{"retrycap.dev/upstreams":"payment=9"}}}`
	tests := []struct {
		name     string
		gvk      metav1.GroupVersionKind
		raw      string
		want     string // the workload, "" for none
		upstream string
	}{
		{"cronjob", metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"},
			`{"metadata":{"name":"nightly","namespace":"ops"},"spec":{"schedule":"@daily","jobTemplate":{"spec":{"template":` + tmpl + `}}}}`, "CronJob ops/nightly", "payment=9"},
		{"cronjob with a stray spec.template", metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"},
			`{"metadata":{"name":"nightly","namespace":"ops"},"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/upstreams":"payment=1"}}},"jobTemplate":{"spec":{"template":` + tmpl + `}}}}`, "CronJob ops/nightly", "payment=9"},
		{"job", metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
			`{"metadata":{"name":"once","namespace":"ops"},"spec":{"template":` + tmpl + `}}`, "Job ops/once", "payment=9"},
		{"replicaset", metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
			`{"metadata":{"name":"rs","namespace":"ops"},"spec":{"template":` + tmpl + `}}`, "ReplicaSet ops/rs", "payment=9"},
		{"cronjob's job", metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
			`{"metadata":{"name":"nightly-29000000","namespace":"ops",` + owner + `},"spec":{"template":` + tmpl + `}}`, "", ""},
		{"deployment's replicaset", metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
			`{"metadata":{"name":"web-5d8f","namespace":"ops",` + owner + `},"spec":{"template":` + tmpl + `}}`, "", ""},
		{"another group's Job", metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Job"},
			`{"metadata":{"name":"once","namespace":"ops"},"spec":{"template":` + tmpl + `}}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := decodeWorkload(tt.gvk, []byte(tt.raw))
			w, ok := d.workload, d.ok
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if tt.want != "" {
					t.Fatalf("not a workload, want %s", tt.want)
				}
				return
			}
			if w.String() != tt.want || w.Annotations.Get("retrycap.dev/upstreams") != tt.upstream || w.Labels.Get("app") != "nightly" {
				t.Fatalf("decodeWorkload = %+v, want %s with %s", w, tt.want, tt.upstream)
			}
		})
	}
}

// TestAnnotationPatchKinds: the gate's rewrite applies to each kind at its template's path, and
// leaves every other field as it was.
func TestAnnotationPatchKinds(t *testing.T) {
	rw := &gate.Rewrite{Upstreams: "payment=2", RewrittenFrom: "payment=9"}
	ann := `{"retrycap.dev/upstreams":"payment=9"}`
	tests := []struct{ kind, in, want string }{
		{"CronJob",
			`{"spec":{"schedule":"@daily","jobTemplate":{"spec":{"template":{"metadata":{"annotations":` + ann + `}}}}}}`,
			`{"spec":{"schedule":"@daily","jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/rewritten-from":"payment=9","retrycap.dev/upstreams":"payment=2"}}}}}}}`},
		{"Job",
			`{"spec":{"backoffLimit":1,"template":{"metadata":{"annotations":` + ann + `}}}}`,
			`{"spec":{"backoffLimit":1,"template":{"metadata":{"annotations":{"retrycap.dev/rewritten-from":"payment=9","retrycap.dev/upstreams":"payment=2"}}}}}`},
		{"ReplicaSet",
			`{"spec":{"template":{"metadata":{"annotations":` + ann + `}}}}`,
			`{"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/rewritten-from":"payment=9","retrycap.dev/upstreams":"payment=2"}}}}}`},
		{"Pod",
			`{"metadata":{"annotations":` + ann + `}}`,
			`{"metadata":{"annotations":{"retrycap.dev/rewritten-from":"payment=9","retrycap.dev/upstreams":"payment=2"}}}`},
	}
	for _, tt := range tests {
		ops := annotationPatch(tt.kind, rw)
		raw, err := json.Marshal(ops)
		if err != nil {
			t.Fatal(err)
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Apply([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: applying %s: %v", tt.kind, raw, err)
		}
		if !jsonpatch.Equal(out, []byte(tt.want)) {
			t.Errorf("%s: patched %s\nwant %s", tt.kind, out, tt.want)
		}
	}
	if ops := annotationPatch("Rollout", rw); ops != nil {
		t.Errorf("Rollout: %v", ops)
	}
}
