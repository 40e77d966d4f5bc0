package status

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestDurationsStoredBeforeTheBounds (issue 25): a policy stored before the CRD bounded its
// durations (a per-try timeout of 99999h, a backoff of hours) is still analysed, without a
// panic, and Ready names each field and value out of bounds and what it costs (the injector
// skips the policy's pods). Before, nothing said so: the status was green and the pods came up
// without their proxy.
func TestDurationsStoredBeforeTheBounds(t *testing.T) {
	p := pol(9, v1alpha1.Entrypoint{Service: "gateway"})
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	p.Spec.Retry.PerTryTimeout = d(99999 * time.Hour)
	p.Spec.Retry.Backoff.Base, p.Spec.Retry.Backoff.Max = d(2*time.Hour), d(1<<63-1)
	p.Spec.MaxTimeToAnswer = d(48 * time.Hour)
	var st v1alpha1.RetryPolicyStatus
	Set(&st, input(p, dep("gateway", "catalog=3"), dep("catalog", "")))
	const skip = " (the injector skips this policy's pods until it is fixed)"
	want := cond{"True", "Reconciled", "analysed 2 selected workload(s): 2 service(s), 1 edge(s)" +
		"; warning: spec.maxTimeToAnswer 48h: must be between 1ms and 24h" + skip +
		"; warning: spec.retry.perTryTimeout 99999h: must be between 1ms and 1h" + skip +
		"; warning: spec.retry.backoff.base 2h: must be between 1ms and 1m" + skip +
		"; warning: spec.retry.backoff.max 2562047h47m16.854775807s: must be between 1ms and 1m" + skip}
	if got := condOf(&st, v1alpha1.ConditionReady); got != want {
		t.Errorf("Ready\n got %+v\nwant %+v", got, want)
	}
	// 3 tries of 99999h and backoffs of 2h and 4h: computed exactly, nothing wrapped.
	if st.WorstTimeToAnswer != "300003h0m0s" || st.Amplification != 3 {
		t.Errorf("status: worst time %q, amplification %d; want 300003h0m0s, 3", st.WorstTimeToAnswer, st.Amplification)
	}
}

// TestDedupNamesStoredBeforeThePattern: a spec.retry.dedupUpstreams name the injector refuses
// ("Ledger", stored before the CRD's pattern) is named in Ready, as a duration out of bounds is.
// Before, Ready was green while the injector skipped every pod of the policy (InvalidPolicy).
func TestDedupNamesStoredBeforeThePattern(t *testing.T) {
	p := pol(9, v1alpha1.Entrypoint{Service: "gateway"})
	p.Spec.Retry.DedupUpstreams = []string{"catalog", "Ledger", "pay ment"}
	var st v1alpha1.RetryPolicyStatus
	Set(&st, input(p, dep("gateway", "catalog=3"), dep("catalog", "")))
	const skip = " (the injector skips this policy's pods until it is fixed)"
	want := cond{"True", "Reconciled", "analysed 2 selected workload(s): 2 service(s), 1 edge(s)" +
		`; warning: spec.retry.dedupUpstreams "Ledger": is not an upstream name: "Ledger" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed` + skip +
		`; warning: spec.retry.dedupUpstreams "pay ment": is not an upstream name: "pay ment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed` + skip}
	if got := condOf(&st, v1alpha1.ConditionReady); got != want {
		t.Errorf("Ready\n got %+v\nwant %+v", got, want)
	}
}
