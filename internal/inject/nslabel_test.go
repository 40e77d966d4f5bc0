package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestInjectionLabelValues: the namespace label retrycap.dev/injection turns injection on with
// "enabled" only. Before, any other value ("true", as Istio's sidecar.istio.io/inject reads, or
// "Enabled") was an ordinary InjectionNotEnabled skip: nothing on the pod, no event, and the
// policy's pods ran without the proxy. Now a value other than "enabled" or "disabled" is
// recorded (InvalidNamespaceLabel) on each pod a policy selects, naming the namespace, the label
// and the value; a pod no policy selects is left alone, as before.
func TestInjectionLabelValues(t *testing.T) {
	policies := []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}}}}
	pod := func(team string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Labels: map[string]string{"team": team}, Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
	}
	for _, tc := range []struct {
		name, label, team string
		ann               map[string]string
		want              string // the skip, "" when injected
		annotated         bool   // the skip recorded on the pod
	}{
		{name: "enabled", label: "enabled", team: "web"},
		{name: "true, selected", label: "true", team: "web", annotated: true,
			want: `InvalidNamespaceLabel: namespace shop has label retrycap.dev/injection="true": want "enabled" (inject the pods a policy selects) or "disabled"; RetryPolicy shop/web selects the pod`},
		{name: "Enabled, selected", label: "Enabled", team: "web", annotated: true,
			want: `InvalidNamespaceLabel: namespace shop has label retrycap.dev/injection="Enabled": want "enabled" (inject the pods a policy selects) or "disabled"; RetryPolicy shop/web selects the pod`},
		{name: "true, not selected", label: "true", team: "batch",
			want: `InjectionNotEnabled: namespace shop has label retrycap.dev/injection="true", which is not "enabled", and no policy selects the pod`},
		{name: "disabled", label: "disabled", team: "web",
			want: `InjectionNotEnabled: namespace shop is not labelled retrycap.dev/injection=enabled and the pod is not annotated retrycap.dev/inject: "true"`},
		{name: "true, but the pod asks", label: "true", team: "web", ann: map[string]string{"retrycap.dev/inject": "true"}},
		{name: "true, but the pod opts out", label: "true", team: "web", ann: map[string]string{"retrycap.dev/inject": "false"},
			want: `OptedOut: annotation retrycap.dev/inject is "false"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(testConfig, Input{Pod: pod(tc.team, tc.ann), NamespaceLabels: map[string]string{"retrycap.dev/injection": tc.label}, Policies: policies})
			if tc.want == "" {
				if !d.Injected {
					t.Fatalf("skipped: %v; want injected", d.Skip)
				}
				return
			}
			if d.Injected || d.Skip.String() != tc.want {
				t.Fatalf("injected %t, skip %v\nwant %s", d.Injected, d.Skip, tc.want)
			}
			if got, ok := d.Pod.Annotations[SkippedAnnotation]; ok != tc.annotated || ok && got != tc.want {
				t.Errorf("%s = %q (set %t), want set %t", SkippedAnnotation, got, ok, tc.annotated)
			}
		})
	}
}
