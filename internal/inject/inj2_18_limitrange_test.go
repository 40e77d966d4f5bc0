package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// podLimitRangeCases are LimitRange items of type Pod against a pod whose app requests 100m CPU
// and 64Mi and is limited to 200m and 96Mi, with the proxy's default resources (10m/2 CPU,
// 32Mi/64Mi): the skip each makes ("" = injected). The webhook's envtest
// (inj2_18_limitrange_envtest_test.go) checks that the API server's LimitRanger agrees.
var podLimitRangeCases = []struct {
	Name     string
	Item     corev1.LimitRangeItem
	Ann      map[string]string
	PodLevel *corev1.ResourceRequirements
	Skip     string
}{
	{Name: "max cpu", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")},
		Skip: "max cpu is 1, and the pod's cpu limit is 2200m with the proxy (whose limit is 2), 200m without it (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace)"},
	{Name: "max memory", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("memory", "128Mi")},
		Skip: "max memory is 128Mi, and the pod's memory limit is 160Mi with the proxy (whose limit is 64Mi), 96Mi without it (set the annotation retrycap.dev/proxy-memory-limit on the pod's template or its Namespace)"},
	{Name: "cpu ratio", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, MaxLimitRequestRatio: rl("cpu", "4")},
		Skip: "maxLimitRequestRatio cpu is 4, and the pod's cpu limit over its request is 20 with the proxy (2200m over 110m), 2 without it (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)"},
	{Name: "max cpu, annotated", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")}, Ann: map[string]string{"retrycap.dev/proxy-cpu-limit": "500m"}},
	{Name: "max cpu 3 fits", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "3"), Min: rl("memory", "64Mi")}},
	// Broken without the proxy: the API server refuses the pod either way, and it is not the
	// proxy's doing, so the pod is injected as before (and refused as before).
	{Name: "min cpu the app breaks", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Min: rl("cpu", "1")}},
	{Name: "max cpu the app breaks", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "100m")}},
	// Pod-level resources replace the sums; the injector adds the proxy's requests to them
	// (podLevelRoom), limits included.
	{Name: "pod-level max cpu", Item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")},
		PodLevel: &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("128Mi")}, Limits: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("128Mi")}},
		Skip:     "max cpu is 1, and the pod's cpu limit is 1010m with the proxy (whose limit is 2), 1 without it (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace)"},
}

func appWithResources() corev1.Container {
	return corev1.Container{Name: "app", Image: "example/app:v1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("64Mi")},
			Limits: corev1.ResourceList{"cpu": resource.MustParse("200m"), "memory": resource.MustParse("96Mi")}}}
}

// inj2_18: a LimitRange item of type Pod (the sum over the pod's containers) that the proxy's
// addition breaks. On main such items were not judged: the pod was injected and the API server
// refused it whole ("maximum cpu usage per Pod is 1, but limit is 2200m"), so no pod of the
// workload was created. Now it is skipped as LimitRangeConflict, naming the item.
func TestInj218PodLimitRange(t *testing.T) {
	for _, tc := range podLimitRangeCases {
		t.Run(tc.Name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Annotations: tc.Ann},
				Spec: corev1.PodSpec{Containers: []corev1.Container{appWithResources()}, Resources: tc.PodLevel}}
			lrs := []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "per-pod"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
				{Type: corev1.LimitTypeContainer, Max: rl("cpu", "2")}, tc.Item}}}}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"}, LimitRanges: lrs,
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			want := ""
			if tc.Skip != "" {
				want = "LimitRangeConflict: LimitRange shop/per-pod spec.limits[1] (type Pod) " + tc.Skip + ": the API server would refuse the pod"
			}
			switch {
			case want == "" && !d.Injected:
				t.Fatalf("skipped: %q; want injected", d.Skip.String())
			case want != "" && (d.Injected || d.Skip.String() != want):
				t.Fatalf("injected %t, skip %v\nwant skip %q", d.Injected, d.Skip, want)
			case want != "" && d.Pod.Annotations[SkippedAnnotation] != want:
				t.Fatalf("annotation %q, want %q", d.Pod.Annotations[SkippedAnnotation], want)
			case want != "" && (d.Pod.Spec.Resources != nil && !d.Pod.Spec.Resources.Limits.Cpu().Equal(resource.MustParse("1"))):
				t.Fatalf("the skipped pod's pod-level resources changed: %v", d.Pod.Spec.Resources)
			}
		})
	}
}
