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

// partOfShop selects the shop's workloads (workloadtest.Deployment labels them so).
var partOfShop = map[string]string{"app.kubernetes.io/part-of": "shop"}

// canaryOf is a Deployment named name whose service is service (retrycap.dev/service).
func canaryOf(name, service, upstreams string) workload.Workload {
	w := workloadtest.Deployment(name, upstreams)
	w.Annotations = w.Annotations.With(annotations.Service, service)
	return w
}

// The design's scenario: gateway -x3-> order, and order (incoming) -x3-> payment, cap 4.
func shopWorkloads() []workload.Workload {
	return []workload.Workload{workloadtest.Deployment("gateway", "order=3"), workloadtest.Deployment("payment", "")}
}

func TestDecide(t *testing.T) {
	reject := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	rewriteP := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementRewrite, nil)
	audit := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementAudit, nil)
	lower := workloadtest.Deployment("order", "payment=1")
	over := workloadtest.Deployment("order", "payment=3")
	overOld := workloadtest.Deployment("order", "payment=2")
	storedOver := append(shopWorkloads(), over)
	unselected := workloadtest.Policy("other", 4, v1alpha1.EnforcementReject, map[string]string{"team": "x"})

	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "reject: over-cap create, exact message",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: over},
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"},
		},
		{
			// A canary of order (admitted earlier under Audit, or before the policy) declares
			// payment=3; a sibling declaring payment=1 is judged on its own edge, not on the merge.
			name: "reject: a canary's larger attempts are not held against a sibling",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(append(shopWorkloads(), canaryOf("order-v2", "order", "payment=3"))),
				Incoming: lower},
			want: Decision{Allowed: true},
		},
		{
			name: "reject: a sibling over the cap is judged on its own attempts",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(append(shopWorkloads(), canaryOf("order-v2", "order", "payment=1"))),
				Incoming: canaryOf("order-v3", "order", "payment=2")},
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x3-> order -x2-> payment = 6 > cap 4; order may keep payment=1"},
		},
		{
			name: "reject: within-cap create passes",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: lower},
			want: Decision{Allowed: true},
		},
		{
			name: "reject: an update that raises attempts is refused",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(append(shopWorkloads(), overOld)), Incoming: over, Old: &overOld},
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"},
		},
		{
			name: "reject: an update that lowers attempts passes although still over",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(storedOver), Incoming: overOld, Old: &over},
			want: Decision{Allowed: true},
		},
		{
			name: "reject: an update that raises nothing (image bump) passes",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(storedOver), Incoming: over, Old: &over},
			want: Decision{Allowed: true},
		},
		{
			name: "an update that brings the workload under the policy is judged like a create",
			in: Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, map[string]string{"app.kubernetes.io/part-of": "shop"})},
				Source: workloads(shopWorkloads()), Incoming: over, Old: func() *workload.Workload {
					w := over
					w.Labels = workload.PairsOf(map[string]string{})
					return &w
				}()},
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"},
		},
		{
			name: "rewrite: lowered, old value kept, warning says what changed",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{rewriteP}, Source: workloads(shopWorkloads()), Incoming: over},
			want: Decision{Allowed: true,
				Rewrite:  &Rewrite{Upstreams: "payment=1", RewrittenFrom: "payment=3"},
				Warnings: []string{"RetryPolicy shop/checkout rewrote retrycap.dev/upstreams of Deployment shop/order: payment=3 -> payment=1 (gateway -x3-> order -x3-> payment = 9 > cap 4)"}},
		},
		{
			name: "rewrite: only the edge over the cap changes, canonical format",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{rewriteP}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment = 3 ,  audit")},
			want: Decision{Allowed: true,
				Rewrite:  &Rewrite{Upstreams: "payment=1, audit", RewrittenFrom: "payment = 3 ,  audit"},
				Warnings: []string{"RetryPolicy shop/checkout rewrote retrycap.dev/upstreams of Deployment shop/order: payment = 3 ,  audit -> payment=1, audit (gateway -x3-> order -x3-> payment = 9 > cap 4)"}},
		},
		{
			name: "audit: admitted with the warning",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{audit}, Source: workloads(shopWorkloads()), Incoming: over},
			want: Decision{Allowed: true, Warnings: []string{"RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1 (admitted: enforcement is Audit)"}},
		},
		{
			name: "no policy selects the workload: untouched, its malformed annotation said as a warning",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{unselected}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=x")},
			want: Decision{Allowed: true, Warnings: []string{`Deployment shop/order: annotation retrycap.dev/upstreams: token "payment=x" at column 1: attempts must be an integer 1..100`}},
		},
		{
			name: "malformed annotation: denied in Audit mode too, with token and column",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{audit}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=3, inventory=x")},
			want: Decision{Message: `Deployment shop/order: annotation retrycap.dev/upstreams: token "inventory=x" at column 12: attempts must be an integer 1..100`},
		},
		{
			name: "several Reject policies: the strictest (lowest cap) is named, the others listed",
			in: Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("a-loose", 6, v1alpha1.EnforcementReject, nil), workloadtest.Policy("b-strict", 2, v1alpha1.EnforcementReject, nil)},
				Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=3")},
			want: Decision{Message: "RetryPolicy shop/b-strict: gateway -x3-> order -x3-> payment = 9 > cap 2; no rewrite fits: even with order: payment=1, gateway -x3-> order -x1-> payment = 3 > cap 2: lower Deployment shop/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy shop/b-strict spec.maxAmplification: 2; also over the cap of RetryPolicy shop/a-loose (cap 6)"},
		},
		{
			name: "several Rewrite policies: the minimum wins",
			in: Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("a", 7, v1alpha1.EnforcementRewrite, nil), workloadtest.Policy("b", 4, v1alpha1.EnforcementRewrite, nil)},
				Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=3")},
			want: Decision{Allowed: true,
				Rewrite:  &Rewrite{Upstreams: "payment=1", RewrittenFrom: "payment=3"},
				Warnings: []string{"RetryPolicies shop/a, shop/b rewrote retrycap.dev/upstreams of Deployment shop/order: payment=3 -> payment=1 (gateway -x3-> order -x3-> payment = 9 > cap 7; gateway -x3-> order -x3-> payment = 9 > cap 4)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide()\n got  %#v\n want %#v", got, tt.want)
				if got.Rewrite != nil {
					t.Logf("rewrite: %+v", *got.Rewrite)
				}
			}
		})
	}
}

// A malformed retrycap.dev/inject is refused under every enforcement mode, with the object, the
// annotation and the value named; annotations on a workload's own metadata get a warning.
func TestDecideInjectAndMisplacedAnnotations(t *testing.T) {
	for _, mode := range []v1alpha1.Enforcement{v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit} {
		t.Run(string(mode), func(t *testing.T) {
			w := workloadtest.Deployment("order", "payment=1")
			w.Annotations = w.Annotations.With(annotations.Inject, "yes")
			got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("checkout", 4, mode, nil)}, Source: workloads(shopWorkloads()), Incoming: w})
			want := Decision{Message: `Deployment shop/order: annotation retrycap.dev/inject: value "yes" is not "true" or "false"`}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Decide = %+v\nwant %+v", got, want)
			}
			for _, ok := range []string{"true", "false"} {
				w.Annotations = w.Annotations.With(annotations.Inject, ok)
				if d := Decide(Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("checkout", 4, mode, nil)}, Source: workloads(shopWorkloads()), Incoming: w}); !d.Allowed {
					t.Fatalf("inject %q: %+v", ok, d)
				}
			}
		})
	}

	w := workloadtest.Deployment("order", "payment=1")
	objAnn := map[string]string{annotations.Upstreams: "payment=9", annotations.Inject: "true", annotations.Service: "order", "other": "x"}
	w.Annotations = w.Annotations.With(annotations.Service, "order") // the same value on the template: no warning
	got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)}, Source: workloads(shopWorkloads()), Incoming: w, ObjectAnnotations: objAnn})
	want := Decision{Allowed: true, Warnings: []string{
		`Deployment shop/order: annotation retrycap.dev/upstreams="payment=9" is on the Deployment's own metadata, which retrycap does not read; put it on spec.template.metadata.annotations`,
		`Deployment shop/order: annotation retrycap.dev/inject="true" is on the Deployment's own metadata, which retrycap does not read; put it on spec.template.metadata.annotations`,
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decide = %+v\nwant %+v", got, want)
	}
	// A CronJob's pod template is spec.jobTemplate.spec.template: the warning names that path.
	cj := workloadtest.Deployment("nightly", "payment=1")
	cj.Kind = workload.KindCronJob
	got = Decide(Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("other", 4, v1alpha1.EnforcementReject, map[string]string{"team": "x"})}, Incoming: cj, ObjectAnnotations: map[string]string{annotations.Upstreams: "payment=9"}})
	if want := []string{`CronJob shop/nightly: annotation retrycap.dev/upstreams="payment=9" is on the CronJob's own metadata, which retrycap does not read; put it on spec.jobTemplate.spec.template.metadata.annotations`}; !got.Allowed || !reflect.DeepEqual(got.Warnings, want) {
		t.Fatalf("CronJob with a misplaced annotation: %+v", got)
	}
	// Also with a denial, and when no policy selects the workload.
	over := workloadtest.Deployment("order", "payment=3")
	got = Decide(Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)}, Source: workloads(shopWorkloads()), Incoming: over, ObjectAnnotations: map[string]string{annotations.Inject: "true"}})
	if got.Allowed || len(got.Warnings) != 1 {
		t.Fatalf("denied with a misplaced annotation: %+v", got)
	}
	got = Decide(Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("other", 4, v1alpha1.EnforcementReject, map[string]string{"team": "x"})}, Incoming: over, ObjectAnnotations: map[string]string{annotations.Inject: "true"}})
	if !got.Allowed || len(got.Warnings) != 1 {
		t.Fatalf("unselected with a misplaced annotation: %+v", got)
	}
}

// A proxy resource annotation the injector would refuse (its pods would start without the
// proxy, the skip said only on each pod) is refused at the workload, under every enforcement
// mode, naming the workload, the annotation and the value; a right one is admitted. Before,
// the gate admitted it (and warned that the annotation was ignored).
func TestDecideProxyResourceAnnotations(t *testing.T) {
	for _, mode := range []v1alpha1.Enforcement{v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit} {
		t.Run(string(mode), func(t *testing.T) {
			w := workloadtest.Deployment("order", "payment=1")
			w.Annotations = w.Annotations.With("retrycap.dev/proxy-cpu-request", "2").With("retrycap.dev/proxy-cpu-limit", "1")
			in := Input{Policies: []*v1alpha1.RetryPolicy{workloadtest.Policy("checkout", 4, mode, nil)}, Source: workloads(shopWorkloads()), Incoming: w}
			want := Decision{Message: `Deployment shop/order: annotation retrycap.dev/proxy-cpu-request "2" is above annotation retrycap.dev/proxy-cpu-limit "1": the proxy's CPU request may not exceed its CPU limit`}
			if got := Decide(in); !reflect.DeepEqual(got, want) {
				t.Fatalf("Decide = %+v\nwant %+v", got, want)
			}
			w.Annotations = w.Annotations.With("retrycap.dev/proxy-cpu-request", "200m")
			in.Incoming = w
			if got := Decide(in); !got.Allowed || len(got.Warnings) != 0 {
				t.Fatalf("right values: %+v", got)
			}
			w.Annotations = w.Annotations.With("retrycap.dev/proxy-memory-limit", "64MB")
			in.Incoming = w
			if got := Decide(in); got.Allowed || !strings.HasPrefix(got.Message, `Deployment shop/order: annotation retrycap.dev/proxy-memory-limit "64MB" is not a Kubernetes quantity (such as 500m, 1 or 48Mi): `) {
				t.Fatalf("bad quantity: %+v", got)
			}
		})
	}
}
