package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// inj2_18: a container of the pod's own named retrycap-proxy. On main the name alone was proof
// of injection: such a pod was an AlreadyInjected skip, not recorded, with no annotation and no
// event, so the workload ran without the proxy and nobody was told. Now the injector's own
// container is told from a foreign one by what it renders (the image, or --listen and --service).
func TestInj218ForeignProxyName(t *testing.T) {
	enabled := map[string]string{"retrycap.dev/injection": "enabled"}
	policies := []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}
	app := corev1.Container{Name: "app", Image: "example/app:v1"}
	always := corev1.ContainerRestartPolicyAlways
	const foreign = `ContainerNameConflict: spec.containers[1] is named retrycap-proxy but is not retrycap's proxy (image "someone/else:v2", not "retrycap/retrycap-proxy:v0.1.0", and no --listen=127.0.0.1:15001 and --service= arguments): container names are unique in a pod, so the proxy cannot be added; rename the container`
	cases := []struct {
		name     string
		spec     corev1.PodSpec
		labels   map[string]string
		injected bool
		skip     string
		recorded bool
	}{
		{name: "foreign app container", spec: corev1.PodSpec{Containers: []corev1.Container{app, {Name: "retrycap-proxy", Image: "someone/else:v2"}}},
			labels: enabled, skip: foreign, recorded: true},
		{name: "foreign init container", spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "retrycap-proxy", Image: "someone/else:v2", Args: []string{"--service=x"}}}, Containers: []corev1.Container{app}},
			labels: enabled, recorded: true,
			skip: `ContainerNameConflict: spec.initContainers[0] is named retrycap-proxy but is not retrycap's proxy (image "someone/else:v2", not "retrycap/retrycap-proxy:v0.1.0", and no --listen=127.0.0.1:15001 and --service= arguments): container names are unique in a pod, so the proxy cannot be added; rename the container`},
		// A namespace nobody enabled: the ordinary silent skip, whatever its containers are called.
		{name: "foreign, not enabled", spec: corev1.PodSpec{Containers: []corev1.Container{app, {Name: "retrycap-proxy", Image: "someone/else:v2"}}},
			skip: "InjectionNotEnabled: namespace shop is not labelled retrycap.dev/injection=enabled and the pod is not annotated retrycap.dev/inject: \"true\""},
		{name: "ours, configured image", spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "retrycap-proxy", Image: "retrycap/retrycap-proxy:v0.1.0", RestartPolicy: &always}}, Containers: []corev1.Container{app}},
			labels: enabled, skip: "AlreadyInjected: init container retrycap-proxy exists"},
		// Injected by a manager with another --proxy-image (an upgrade, a mirror registry).
		{name: "ours, another image", spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "retrycap-proxy", Image: "mirror.example/retrycap-proxy:v0.0.9", RestartPolicy: &always,
			Args: []string{"--listen=127.0.0.1:15001", "--admin=:15020", "--service=app"}}}, Containers: []corev1.Container{app}},
			labels: enabled, skip: "AlreadyInjected: init container retrycap-proxy exists"},
		{name: "no such container", spec: corev1.PodSpec{Containers: []corev1.Container{app}}, labels: enabled, injected: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"}, Spec: tc.spec}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: tc.labels, Policies: policies})
			if d.Injected != tc.injected {
				t.Fatalf("injected %t, want %t (skip %v)", d.Injected, tc.injected, d.Skip)
			}
			if tc.injected {
				return
			}
			if got := d.Skip.String(); got != tc.skip {
				t.Fatalf("skip\n%s\nwant\n%s", got, tc.skip)
			}
			if got := d.Skip.Reason.Recorded(); got != tc.recorded {
				t.Fatalf("recorded %t, want %t", got, tc.recorded)
			}
			ann, ok := d.Pod.Annotations[SkippedAnnotation]
			if ok != tc.recorded || (ok && ann != tc.skip) {
				t.Fatalf("annotation %q (set %t), want set %t", ann, ok, tc.recorded)
			}
			if len(d.Pod.Spec.InitContainers) != len(tc.spec.InitContainers) || len(d.Pod.Spec.Containers) != len(tc.spec.Containers) {
				t.Fatalf("containers changed: %d init, %d", len(d.Pod.Spec.InitContainers), len(d.Pod.Spec.Containers))
			}
		})
	}
}
