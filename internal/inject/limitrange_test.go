package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// limitRangeCases are LimitRange items of type Container against the proxy's default resources
// (10m/2 CPU, 32Mi/64Mi): the skip each makes ("" = injected). The webhook's envtest
// (inject18_limitrange_envtest_test.go) checks that the API server's LimitRanger agrees on some.
var limitRangeCases = []struct {
	Name string
	Item corev1.LimitRangeItem
	Ann  map[string]string
	Skip string
}{
	{Name: "min cpu", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "50m")},
		Skip: "min cpu is 50m, and the proxy's cpu request is 10m (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)"},
	{Name: "min cpu, annotated", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "50m")}, Ann: map[string]string{"retrycap.dev/proxy-cpu-request": "50m"}},
	{Name: "min memory", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("memory", "48Mi")},
		Skip: "min memory is 48Mi, and the proxy's memory request is 32Mi (set the annotation retrycap.dev/proxy-memory-request on the pod's template or its Namespace)"},
	{Name: "max cpu", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("cpu", "1")},
		Skip: "max cpu is 1, and the proxy's cpu limit is 2 (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace)"},
	{Name: "max memory", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "48Mi")},
		Skip: "max memory is 48Mi, and the proxy's memory limit is 64Mi (set the annotation retrycap.dev/proxy-memory-limit on the pod's template or its Namespace)"},
	{Name: "cpu ratio", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "10")},
		Skip: "maxLimitRequestRatio cpu is 10, and the proxy's cpu limit 2 over its request 10m is 200 (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)"},
	{Name: "memory ratio 2 exactly", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("memory", "2")}},
	{Name: "memory ratio 1.5", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("memory", "1500m")},
		Skip: "maxLimitRequestRatio memory is 1500m, and the proxy's memory limit 64Mi over its request 32Mi is 2 (set the annotation retrycap.dev/proxy-memory-request on the pod's template or its Namespace)"},
	// The LimitRanger, reinvoked after the webhook, gives the proxy the LimitRange's defaults
	// for what it does not set (measured: a request of 1Mi).
	{Name: "min ephemeral-storage", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("ephemeral-storage", "1Mi")}},
	// review18: a request of 0 (an annotation may set one) under a ratio: the LimitRanger
	// refuses it ("but no request is specified or request is 0"); it was injected.
	{Name: "cpu ratio, request 0", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "10")}, Ann: map[string]string{"retrycap.dev/proxy-cpu-request": "0"},
		Skip: "maxLimitRequestRatio cpu is 10, and the proxy's cpu request is 0, which no ratio admits (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)"},
	{Name: "fits", Item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "10m"), Max: rl("cpu", "2"), MaxLimitRequestRatio: rl("cpu", "200")}},
}

func rl(r, q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceName(r): resource.MustParse(q)}
}

// inject18: a namespace's LimitRange that the proxy's resources break. On main the pod was
// injected and the API server refused it whole ("minimum cpu usage per Container is 50m, but
// request is 10m": no pod of the workload was created); now it is skipped, naming the
// LimitRange, the item, the bound, the proxy's value and the annotation to set.
func TestInject18LimitRange(t *testing.T) {
	for _, tc := range limitRangeCases {
		t.Run(tc.Name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Annotations: tc.Ann},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
			lrs := []corev1.LimitRange{
				// A Pod item the pod breaks without the proxy (no requests) is not the proxy's doing; a
				// range of another name sorts after.
				{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pods"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Min: rl("cpu", "1")}}}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "per-container"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
					{Type: corev1.LimitTypePersistentVolumeClaim, Min: rl("storage", "1Gi")}, tc.Item}}},
			}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"}, LimitRanges: lrs,
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			want := ""
			if tc.Skip != "" {
				want = "LimitRangeConflict: LimitRange shop/per-container spec.limits[1] (type Container) " + tc.Skip + ": the API server would refuse the pod"
			}
			switch {
			case want == "" && !d.Injected:
				t.Fatalf("skipped: %q; want injected", d.Skip.String())
			case want != "" && (d.Injected || d.Skip.String() != want):
				t.Fatalf("injected %t, skip %v\nwant skip %q", d.Injected, d.Skip, want)
			case want != "" && d.Pod.Annotations[SkippedAnnotation] != want:
				t.Fatalf("annotation %q, want %q", d.Pod.Annotations[SkippedAnnotation], want)
			}
		})
	}
}
