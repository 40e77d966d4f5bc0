package inject

import "testing"

// TestEmptyServiceAnnotationSkips: a pod whose retrycap.dev/service is empty is skipped as
// InvalidAnnotation, recorded on it; before, it was injected with --service named after the
// pod's label or name, not the service its callers call.
func TestEmptyServiceAnnotationSkips(t *testing.T) {
	d := decideIn(nil, nil, map[string]string{"app.kubernetes.io/name": "gw-7f9c"}, map[string]string{"retrycap.dev/service": ""})
	const want = `InvalidAnnotation: annotation retrycap.dev/service: service name is empty (a template that rendered no value?): write the name, or remove the annotation to name the service by label app.kubernetes.io/name, else the workload's name`
	if d.Injected || d.Skip.String() != want {
		t.Fatalf("injected %t, skip %v\nwant %s", d.Injected, d.Skip, want)
	}
	if got := d.Pod.Annotations[SkippedAnnotation]; got != want {
		t.Errorf("%s = %q", SkippedAnnotation, got)
	}
}
