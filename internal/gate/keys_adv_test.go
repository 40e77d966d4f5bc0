package gate

import (
	"reflect"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// TestDecideStrayKeys: annotation keys are case-sensitive, so "retrycap.dev/Upstreams:
// payment=9" was admitted with its nine attempts never counted (a false allow); a typo such as
// "retrycap.dev/upstream" was ignored without a word.
func TestDecideStrayKeys(t *testing.T) {
	reject := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	audit := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementAudit, nil)
	unselected := workloadtest.Policy("other", 4, v1alpha1.EnforcementReject, map[string]string{"team": "x"})
	with := func(w workload.Workload, kv ...string) workload.Workload {
		for i := 0; i < len(kv); i += 2 {
			w.Annotations = w.Annotations.With(kv[i], kv[i+1])
		}
		return w
	}
	order := workloadtest.Deployment("order", "")
	miscased := `Deployment shop/order: annotation retrycap.dev/Upstreams="payment=9": annotation keys are case-sensitive and retrycap reads only retrycap.dev/upstreams, so this value would not be counted; rename the key`
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "a miscased upstreams key on a selected workload is denied, whatever the mode",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{audit}, Source: workloads(shopWorkloads()), Incoming: with(order, "retrycap.dev/Upstreams", "payment=9")},
			want: Decision{Message: miscased},
		},
		{
			name: "the same annotation twice in different casing: denied for the miscased one",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()),
				Incoming: with(order, annotations.Upstreams, "payment=1", "retrycap.dev/Upstreams", "payment=9")},
			want: Decision{Message: miscased},
		},
		{
			name: "miscased inject and service keys",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()),
				Incoming: with(order, "retrycap.dev/INJECT", "true")},
			want: Decision{Message: `Deployment shop/order: annotation retrycap.dev/INJECT="true": annotation keys are case-sensitive and retrycap reads only retrycap.dev/inject, so this value would not be counted; rename the key`},
		},
		{
			name: "a miscased key on a workload no policy selects is a warning",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{unselected}, Incoming: with(order, "retrycap.dev/Upstreams", "payment=9")},
			want: Decision{Allowed: true, Warnings: []string{miscased}},
		},
		{
			name: "an unknown retrycap key is a warning, and the workload is still judged",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()),
				Incoming: with(order, annotations.Upstreams, "payment=1", "retrycap.dev/upstream", "payment=9")},
			want: Decision{Allowed: true, Warnings: []string{`Deployment shop/order: annotation retrycap.dev/upstream="payment=9" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`}},
		},
		{
			name: "the keys retrycap writes are not stray",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()),
				Incoming: with(order, annotations.Upstreams, "payment=1", annotations.RewrittenFrom, "payment=3", annotations.InjectedStatus, "shop/checkout",
					"retrycap.dev/injection-skipped", "NoPolicy: x", "retrycap.dev/injection-warnings", "y", "example.com/upstreams", "z")},
			want: Decision{Allowed: true},
		},
		{
			name: "a huge value is quoted clipped",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{unselected}, Incoming: with(order, "retrycap.dev/x", strings.Repeat("é", 150))},
			want: Decision{Allowed: true, Warnings: []string{`Deployment shop/order: annotation retrycap.dev/x="` + strings.Repeat("é", 100) + `... (300 bytes)" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			got.PolicyErrors = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// TestRewrittenFromFitsTheAnnotations: the old value is kept whole when the template's
// annotations have room for it beside the rewritten value, cut to fit (saying so) when not.
func TestRewrittenFromFitsTheAnnotations(t *testing.T) {
	w := workloadtest.Deployment("order", "")
	w.Annotations = w.Annotations.With("team", "payments")
	fixed := len(annotations.Upstreams) + len(annotations.RewrittenFrom) + len("team") + len("payments")
	big := strings.Repeat("a", 100<<10)
	tests := []struct {
		name, value, old string
		want             string
	}{
		{"room for it", "payment=1", "payment=3", "payment=3"},
		{"exactly the room left", big, strings.Repeat("b", maxAnnotationBytes-fixed-len(big)), strings.Repeat("b", maxAnnotationBytes-fixed-len(big))},
		{"cut to fit", big, big + big, strings.Repeat("a", maxAnnotationBytes-fixed-len(big)-len("... (truncated from 204800 bytes)")) + "... (truncated from 204800 bytes)"},
		{"no room even for the note", strings.Repeat("a", maxAnnotationBytes-fixed-10), big, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rewrittenFrom(w, tt.value, tt.old)
			if got != tt.want {
				t.Errorf("rewrittenFrom = %d bytes %q..., want %d bytes", len(got), got[:min(len(got), 20)], len(tt.want))
			}
			if total := fixed + len(tt.value) + len(got); got != "" && total > maxAnnotationBytes {
				t.Errorf("annotations of %d bytes, over %d", total, maxAnnotationBytes)
			}
		})
	}
}
