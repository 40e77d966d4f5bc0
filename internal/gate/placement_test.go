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

// TestDecidePlacement: what analyze says of a retrycap annotation by where it sits on the object,
// the gate says too (internal/webhook's TestGateAgreesWithAnalyze compares the two on whole
// manifests): a CronJob's spec.jobTemplate.metadata (the Jobs' own) is warned of with where it
// belongs (was silent); a stray or malformed retrycap annotation on a workload's own metadata
// is judged as on its template (an unknown key warned of, a miscased key or a malformed value
// refused on a selected workload; was a placement warning only, or nothing); an upstream's
// dropped port is warned of (was silent).
func TestDecidePlacement(t *testing.T) {
	reject := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	unselected := workloadtest.Policy("other", 4, v1alpha1.EnforcementReject, map[string]string{"team": "x"})
	cronJob := func(upstreams string) workload.Workload {
		w := workloadtest.Deployment("nightly", upstreams)
		w.Kind = workload.KindCronJob
		return w
	}
	const jobTemplateWarning = `CronJob shop/nightly: annotation retrycap.dev/upstreams="payment=9" is on spec.jobTemplate.metadata, the Jobs' own, which retrycap does not read (their pods do not get it): put it on spec.jobTemplate.spec.template.metadata.annotations`
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "a CronJob's job template annotation: warned of, the CronJob judged on its pod template",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: cronJob("payment=1"),
				JobTemplateAnnotations: map[string]string{annotations.Upstreams: "payment=9", "example.com/x": "y"}},
			want: Decision{Allowed: true, Warnings: []string{jobTemplateWarning}},
		},
		{
			name: "the same on a CronJob no policy selects",
			in: Input{Policies: []*v1alpha1.RetryPolicy{unselected}, Incoming: cronJob(""),
				JobTemplateAnnotations: map[string]string{annotations.Upstreams: "payment=9"}},
			want: Decision{Allowed: true, Warnings: []string{jobTemplateWarning}},
		},
		{
			name: "a job template annotation is not read: a malformed one is warned of, not refused (analyze: a warning)",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: cronJob("payment=1"),
				JobTemplateAnnotations: map[string]string{"retrycap.dev/Upstreams": "pay ment=9", annotations.Inject: "yes"}},
			want: Decision{Allowed: true, Warnings: []string{
				`CronJob shop/nightly: annotation retrycap.dev/Upstreams="pay ment=9" is on spec.jobTemplate.metadata, the Jobs' own, which retrycap does not read (their pods do not get it): put it on spec.jobTemplate.spec.template.metadata.annotations`,
				`CronJob shop/nightly: annotation retrycap.dev/inject="yes" is on spec.jobTemplate.metadata, the Jobs' own, which retrycap does not read (their pods do not get it): put it on spec.jobTemplate.spec.template.metadata.annotations`}},
		},
		{
			name: "a job template annotation's huge value is quoted clipped",
			in: Input{Policies: []*v1alpha1.RetryPolicy{unselected}, Incoming: cronJob(""),
				JobTemplateAnnotations: map[string]string{annotations.Upstreams: strings.Repeat("a", 300000)}},
			want: Decision{Allowed: true, Warnings: []string{`CronJob shop/nightly: annotation retrycap.dev/upstreams="` + strings.Repeat("a", 200) + `... (300000 bytes)" is on spec.jobTemplate.metadata, the Jobs' own, which retrycap does not read (their pods do not get it): put it on spec.jobTemplate.spec.template.metadata.annotations`}},
		},
		{
			name: "an unknown key on the workload's own metadata is warned of as on its template",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=1"),
				ObjectAnnotations: map[string]string{"retrycap.dev/upstream": "payment=9"}},
			want: Decision{Allowed: true, Warnings: []string{`Deployment shop/order: annotation retrycap.dev/upstream="payment=9" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`}},
		},
		{
			name: "a miscased key on the workload's own metadata is refused on a selected workload",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=1"),
				ObjectAnnotations: map[string]string{"retrycap.dev/Upstreams": "payment=9"}},
			want: Decision{Message: `Deployment shop/order: annotation retrycap.dev/Upstreams="payment=9": annotation keys are case-sensitive and retrycap reads only retrycap.dev/upstreams, so this value would not be counted; rename the key`},
		},
		{
			name: "a malformed upstreams value on the workload's own metadata, none on its template: refused on a selected workload, with the placement warning",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", ""),
				ObjectAnnotations: map[string]string{annotations.Upstreams: "payment=0"}},
			want: Decision{Message: `Deployment shop/order: annotation retrycap.dev/upstreams: token "payment=0" at column 1: attempts must be an integer 1..100`,
				Warnings: []string{`Deployment shop/order: annotation retrycap.dev/upstreams="payment=0" is on the Deployment's own metadata, which retrycap does not read; put it on spec.template.metadata.annotations`}},
		},
		{
			name: "the template's value wins: a malformed one on the own metadata beside a good one on the template is only misplaced",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=1"),
				ObjectAnnotations: map[string]string{annotations.Upstreams: "payment=0"}},
			want: Decision{Allowed: true, Warnings: []string{`Deployment shop/order: annotation retrycap.dev/upstreams="payment=0" is on the Deployment's own metadata, which retrycap does not read; put it on spec.template.metadata.annotations`}},
		},
		{
			name: "an inject value other than true/false on the own metadata is refused on a selected workload",
			in: Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment=1"),
				ObjectAnnotations: map[string]string{annotations.Inject: "yes"}},
			want: Decision{Message: `Deployment shop/order: annotation retrycap.dev/inject: value "yes" is not "true" or "false"`,
				Warnings: []string{`Deployment shop/order: annotation retrycap.dev/inject="yes" is on the Deployment's own metadata, which retrycap does not read; put it on spec.template.metadata.annotations`}},
		},
		{
			name: "an upstream's port is dropped, said",
			in:   Input{Policies: []*v1alpha1.RetryPolicy{reject}, Source: workloads(shopWorkloads()), Incoming: workloadtest.Deployment("order", "payment:8080=1")},
			want: Decision{Allowed: true, Warnings: []string{`Deployment shop/order: annotation retrycap.dev/upstreams: token "payment:8080=1" at column 1: read as upstream "payment": the graph names services, not ports; port 8080 only picks the Service port whose protocol decides whether a mesh retries the call`}},
		},
		{
			name: "the own metadata's huge value is quoted clipped; on a workload no policy selects, its error is a warning",
			in: Input{Policies: []*v1alpha1.RetryPolicy{unselected}, Incoming: workloadtest.Deployment("order", ""),
				ObjectAnnotations: map[string]string{annotations.Service: strings.Repeat("é", 150)}},
			want: Decision{Allowed: true, Warnings: []string{
				`Deployment shop/order: annotation retrycap.dev/service="` + strings.Repeat("é", 100) + `... (300 bytes)" is on the Deployment's own metadata, which retrycap does not read; put it on spec.template.metadata.annotations`,
				`Deployment shop/order: annotation retrycap.dev/service: service name "` + strings.Repeat("é", 100) + `... (300 bytes)" is not a DNS-1123 label: label longer than 63 characters`}},
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
