package gate

import (
	"reflect"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// An AWS_MAX_ATTEMPTS no SDK reads as a number ("three"): the tries of the workload's SDK edges
// are unknown, which analyze reports as "not checked" (exit 2) and the status as InvalidEnv.
// Before, the gate counted the edge at the policy's default and admitted it in every mode. Now
// it is refused in every mode, like a malformed annotation, naming the workload, container,
// variable and value; a workload no policy selects is not judged.
func TestDecideInvalidAWSEnv(t *testing.T) {
	uploader := workloadtest.Deployment("uploader", "s3.eu-west-1.amazonaws.com")
	uploader.AWS = workload.AWSEnv{Container: "app", MaxAttempts: "three"}
	const msg = `Deployment shop/uploader: container app: env AWS_MAX_ATTEMPTS="three": want a whole number > 0`
	for _, mode := range []v1alpha1.Enforcement{v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit} {
		t.Run(string(mode), func(t *testing.T) {
			p := workloadtest.Policy("checkout", 4, mode, nil)
			got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(shopWorkloads()), Incoming: uploader})
			if want := (Decision{Message: msg}); !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %#v\nwant %#v", got, want)
			}
		})
	}
	t.Run("not selected", func(t *testing.T) {
		p := workloadtest.Policy("other", 4, v1alpha1.EnforcementReject, map[string]string{"team": "x"})
		got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(shopWorkloads()), Incoming: uploader})
		if want := (Decision{Allowed: true}); !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %#v\nwant %#v", got, want)
		}
	})
}
