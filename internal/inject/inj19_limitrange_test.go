package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// inj19: the LimitRanger, reinvoked after the webhooks, gives the proxy what a LimitRange's
// Container defaults hold and the proxy does not set (ephemeral-storage), and then judges the
// items of type Pod on the sums with it. The injector judged the proxy without those defaults and
// Pod items on CPU and memory only, so a Pod max ephemeral-storage that the app's defaulted limit
// reached was injected and the API server refused every pod of the workload (on the real node:
// "maximum ephemeral-storage usage per Pod is 1Gi, but limit is 2Gi"). Now such a pod is skipped,
// naming the item and the LimitRange whose default the proxy gets. The webhook's envtest
// (inj19_limitrange_envtest_test.go) checks the API server agrees.
func TestInj19LimitRangeDefaults(t *testing.T) {
	storage := func(lim, req string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{"ephemeral-storage": resource.MustParse(lim)}, Requests: corev1.ResourceList{"ephemeral-storage": resource.MustParse(req)}}
	}
	defaults := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Default: rl("ephemeral-storage", "1Gi"), DefaultRequest: rl("ephemeral-storage", "512Mi")}
	for _, tc := range []struct {
		name   string
		ranges []corev1.LimitRange
		app    corev1.ResourceRequirements // as the LimitRanger gave it before the webhooks
		skip   string
	}{
		{name: "pod max reached by the app's default",
			ranges: []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "storage"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
				defaults, {Type: corev1.LimitTypePod, Max: rl("ephemeral-storage", "1Gi")}}}}},
			app: storage("1Gi", "512Mi"),
			skip: "LimitRangeConflict: LimitRange shop/storage spec.limits[1] (type Pod) max ephemeral-storage is 1Gi, and the pod's ephemeral-storage limit is 2Gi with the proxy (whose limit is 1Gi), 1Gi without it " +
				"(the proxy's ephemeral-storage limit is the default of LimitRange shop/storage spec.limits[0], which the API server gives it; no annotation of retrycap's sets it): the API server would refuse the pod"},
		{name: "pod max with room", ranges: []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "storage"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			defaults, {Type: corev1.LimitTypePod, Max: rl("ephemeral-storage", "2Gi")}}}}},
			app: storage("1Gi", "512Mi")},
		// The defaults of one LimitRange, the bound of another.
		{name: "two LimitRanges", ranges: []corev1.LimitRange{
			{ObjectMeta: metav1.ObjectMeta{Name: "b-per-pod"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Max: rl("ephemeral-storage", "1500Mi")}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "a-defaults"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{defaults}}}},
			app: storage("1Gi", "512Mi"),
			skip: "LimitRangeConflict: LimitRange shop/b-per-pod spec.limits[0] (type Pod) max ephemeral-storage is 1500Mi, and the pod's ephemeral-storage limit is 2Gi with the proxy (whose limit is 1Gi), 1Gi without it " +
				"(the proxy's ephemeral-storage limit is the default of LimitRange shop/a-defaults spec.limits[0], which the API server gives it; no annotation of retrycap's sets it): the API server would refuse the pod"},
		// No default: the proxy adds no ephemeral-storage, and the pod's limit is the app's.
		{name: "pod max, no default", ranges: []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "storage"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypePod, Max: rl("ephemeral-storage", "1Gi")}}}}},
			app: storage("1Gi", "512Mi")},
		// A default CPU limit is not the proxy's: it sets its own (2), which is judged as before.
		{name: "cpu default, pod max", ranges: []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Default: rl("cpu", "100m"), DefaultRequest: rl("cpu", "100m")}, {Type: corev1.LimitTypePod, Max: rl("cpu", "1")}}}}},
			app: corev1.ResourceRequirements{Limits: rl("cpu", "100m"), Requests: rl("cpu", "100m")},
			skip: "LimitRangeConflict: LimitRange shop/cpu spec.limits[1] (type Pod) max cpu is 1, and the pod's cpu limit is 2100m with the proxy (whose limit is 2), 100m without it " +
				"(set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace): the API server would refuse the pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.ranges {
				tc.ranges[i].Namespace = "shop"
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1", Resources: tc.app}}}}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"}, LimitRanges: tc.ranges,
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			switch {
			case tc.skip == "" && !d.Injected:
				t.Fatalf("skipped: %q; want injected", d.Skip.String())
			case tc.skip != "" && (d.Injected || d.Skip.String() != tc.skip):
				t.Fatalf("injected %t, skip %v\nwant skip %q", d.Injected, d.Skip, tc.skip)
			case tc.skip == "":
				// The proxy as rendered sets no ephemeral-storage: the defaults are the API server's to give.
				for _, c := range d.Pod.Spec.InitContainers {
					if _, ok := c.Resources.Limits["ephemeral-storage"]; ok {
						t.Fatalf("the injected proxy sets ephemeral-storage itself: %v", c.Resources)
					}
				}
			}
		})
	}
}
