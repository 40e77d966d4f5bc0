package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// A pod that arrives with retrycap.dev/injected but without the proxy container carries a copy
// (its template was written from a dump of an injected pod): before, the annotation alone made
// the injector skip it as AlreadyInjected, in silence (no annotation, no event), and every pod
// of such a Deployment ran without the proxy its policy asked for. Now only the container counts;
// the copied annotation is dropped and the pod decided as any other.
func TestCopiedInjectedAnnotation(t *testing.T) {
	const warning = `annotation retrycap.dev/injected="shop/old" came without the retrycap-proxy container, so it was copied (from a pod template, or a dump of an injected pod), not written by an injection: it is removed and the pod decided as any other; the injector writes it on the pods it injects`
	policies := []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}
	pod := func(init ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p",
			Annotations: map[string]string{"retrycap.dev/injected": "shop/old", "retrycap.dev/upstreams": "api=2"}},
			Spec: corev1.PodSpec{InitContainers: init, Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
	}
	enabled := map[string]string{"retrycap.dev/injection": "enabled"}

	t.Run("enabled namespace: injected, the annotation names the policy rendered", func(t *testing.T) {
		d := Decide(testConfig, Input{Pod: pod(), NamespaceLabels: enabled, Policies: policies})
		if !d.Injected {
			t.Fatalf("skipped: %v; want injected", d.Skip)
		}
		if got := d.Pod.Annotations["retrycap.dev/injected"]; got != "shop/all" {
			t.Errorf("retrycap.dev/injected = %q, want %q", got, "shop/all")
		}
		if got := d.Pod.Annotations[WarningsAnnotation]; got != warning {
			t.Errorf("%s = %q\nwant %q", WarningsAnnotation, got, warning)
		}
		if d.StaleInjected != "shop/old" {
			t.Errorf("StaleInjected = %q, want shop/old", d.StaleInjected)
		}
		// The injected pod, admitted again, is the injector's own: left alone.
		again := Decide(testConfig, Input{Pod: d.Pod, NamespaceLabels: enabled, Policies: policies})
		if again.Injected || again.Skip.Reason != AlreadyInjected || again.Skip.Message != "init container retrycap-proxy exists" || again.StaleInjected != "" {
			t.Errorf("second Decide: injected %t, skip %v, stale %q; want AlreadyInjected: init container retrycap-proxy exists", again.Injected, again.Skip, again.StaleInjected)
		}
	})
	t.Run("namespace not enabled: skipped as any pod, the copy removed", func(t *testing.T) {
		d := Decide(testConfig, Input{Pod: pod(), Policies: policies})
		if d.Injected || d.Skip.Reason != NotEnabled {
			t.Fatalf("injected %t, skip %v; want NotEnabled", d.Injected, d.Skip)
		}
		if _, ok := d.Pod.Annotations["retrycap.dev/injected"]; ok {
			t.Errorf("the skipped pod keeps retrycap.dev/injected=%q: it claims a proxy it does not have", d.Pod.Annotations["retrycap.dev/injected"])
		}
		if d.StaleInjected != "shop/old" || len(d.Warnings) != 1 || d.Warnings[0] != warning {
			t.Errorf("StaleInjected %q, warnings %q; want shop/old and [%q]", d.StaleInjected, d.Warnings, warning)
		}
	})
	t.Run("the container is there: already injected, untouched", func(t *testing.T) {
		in := pod(corev1.Container{Name: "retrycap-proxy", Image: "retrycap/retrycap-proxy:v0.1.0"})
		d := Decide(testConfig, Input{Pod: in, NamespaceLabels: enabled, Policies: policies})
		if d.Injected || d.Skip.Reason != AlreadyInjected || d.Skip.Message != "init container retrycap-proxy exists" {
			t.Fatalf("injected %t, skip %v; want AlreadyInjected", d.Injected, d.Skip)
		}
		if d.Pod.Annotations["retrycap.dev/injected"] != "shop/old" || d.StaleInjected != "" {
			t.Errorf("annotation %q, stale %q; want shop/old kept", d.Pod.Annotations["retrycap.dev/injected"], d.StaleInjected)
		}
	})
}
