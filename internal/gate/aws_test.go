package gate

import (
	"reflect"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// TestDecideAWSSDKEdge: order calls S3 through the AWS SDK (AWS_MAX_ATTEMPTS=3 in its env, the
// upstream listed without "=N"): the gate's message gives the container's env as the lever, in
// the words of the status's suggestion, and Rewrite mode does not write an annotation value that
// would only tell retrycap a number while the SDK keeps retrying: it refuses, as Reject does.
func TestDecideAWSSDKEdge(t *testing.T) {
	order := workloadtest.Deployment("order", "payment=1, s3.eu-west-1.amazonaws.com")
	order.AWS = workload.AWSEnv{Container: "app", MaxAttempts: "3"}
	const chain = "gateway -x3-> order -x3-> s3.eu-west-1.amazonaws.com = 9 > cap 4"
	const fix = "Deployment shop/order container app env AWS_MAX_ATTEMPTS: 3 -> 1"
	tests := []struct {
		name string
		mode v1alpha1.Enforcement
		want Decision
	}{
		{name: "reject", mode: v1alpha1.EnforcementReject,
			want: Decision{Message: "RetryPolicy shop/checkout: " + chain + "; " + fix}},
		// Rewrite admitted it with a warning, over the cap, where Reject refuses it: what Rewrite
		// stores is what Reject would admit (wgate19).
		{name: "rewrite leaves the SDK edge's annotation and refuses", mode: v1alpha1.EnforcementRewrite,
			want: Decision{Message: "RetryPolicy shop/checkout: " + chain + "; " + fix + " (refused although enforcement is Rewrite, which rewrites only retrycap.dev/upstreams: the AWS SDK's tries change with the container's env)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := workloadtest.Policy("checkout", 4, tc.mode, nil)
			got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(shopWorkloads()), Incoming: order})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
