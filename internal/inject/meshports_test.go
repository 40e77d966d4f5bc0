package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// inject18: Kuma's and Consul's sidecars bind 15001 for their transparent proxy's outbound
// listener without declaring it. On main such a pod was injected (Kuma's own injected pod:
// testdata/kuma-injected.yaml), retrycap's proxy could not bind 127.0.0.1:15001, and behind its
// startup probe the pod never started. It is skipped now, naming the container and where the
// port was read, unless the mesh says its outbound listener is elsewhere or off.
func TestInject18MeshOutboundPort(t *testing.T) {
	const tail = ": the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	always := corev1.ContainerRestartPolicyAlways
	app := corev1.Container{Name: "app", Image: "example/app:v1"}
	// Kuma's sidecar as its injector makes it (native), Consul's as a regular container (its
	// default) and as a native one.
	kuma := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "kuma-init", Image: "kuma/kuma-init:latest"}, {Name: "kuma-sidecar", Image: "kuma/kuma-dp:latest", RestartPolicy: &always}},
		Containers: []corev1.Container{app}}
	consul := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "consul-connect-inject-init", Image: "hashicorp/consul-k8s-control-plane"}},
		Containers: []corev1.Container{app, {Name: "consul-dataplane", Image: "hashicorp/consul-dataplane"}}}
	consulNative := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "consul-connect-inject-init", Image: "hashicorp/consul-k8s-control-plane"}, {Name: "consul-dataplane", Image: "hashicorp/consul-dataplane", RestartPolicy: &always}},
		Containers: []corev1.Container{app}}
	const kumaAt = "PortConflict: spec.initContainers[1] (container kuma-sidecar) is Kuma's sidecar, whose Envoy listens on port 15001 ("
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		ann  map[string]string
		skip string // "" = injected
		// kumaNS: the namespace is labelled kuma.io/sidecar-injection=enabled.
		kumaNS bool
	}{
		{name: "kuma, outbound on 15002", spec: kuma, ann: map[string]string{"traffic.kuma.io/transparent-proxy-config": "redirect:\n  outbound:\n    enabled: true\n    port: 15002\n"}},
		// review18: where Kuma injected the pod its namespace (or the pod) says so; a pod that
		// already has kuma-sidecar is not injected again (Kuma's needToInject), so its outbound
		// port elsewhere leaves 15001 free. Before, kumaWillInject skipped it as a sidecar to come
		// on 15001.
		{name: "kuma, outbound on 15002, namespace enabled", spec: kuma, kumaNS: true, ann: map[string]string{"traffic.kuma.io/transparent-proxy-config": "redirect:\n  outbound:\n    enabled: true\n    port: 15002\n"}},
		{name: "kuma, outbound off, namespace enabled", spec: kuma, kumaNS: true, ann: map[string]string{"traffic.kuma.io/transparent-proxy-config": "redirect:\n  outbound:\n    enabled: false\n    port: 15001\n"}},
		{name: "kuma, no annotation, namespace enabled", spec: kuma, kumaNS: true, skip: kumaAt + "Kuma's default) for its transparent proxy's outbound traffic" + tail},
		{name: "kuma, outbound off", spec: kuma, ann: map[string]string{"traffic.kuma.io/transparent-proxy-config": "redirect:\n  outbound:\n    enabled: false\n    port: 15001\n"}},
		{name: "kuma, config without a port", spec: kuma, ann: map[string]string{"traffic.kuma.io/transparent-proxy-config": "redirect:\n  inbound:\n    port: 15006\n"},
			skip: kumaAt + "Kuma's default: annotation traffic.kuma.io/transparent-proxy-config sets no redirect.outbound.port) for its transparent proxy's outbound traffic" + tail},
		{name: "kuma, config not YAML", spec: kuma, ann: map[string]string{"traffic.kuma.io/transparent-proxy-config": "redirect: ["},
			skip: kumaAt + "Kuma's default: annotation traffic.kuma.io/transparent-proxy-config is not YAML) for its transparent proxy's outbound traffic" + tail},
		{name: "kuma, older annotation", spec: kuma, ann: map[string]string{"kuma.io/transparent-proxying-outbound-port": "15001"},
			skip: kumaAt + "annotation kuma.io/transparent-proxying-outbound-port) for its transparent proxy's outbound traffic" + tail},
		{name: "kuma, older annotation elsewhere", spec: kuma, ann: map[string]string{"kuma.io/transparent-proxying-outbound-port": "15002"}},
		{name: "kuma, older annotation not a port", spec: kuma, ann: map[string]string{"kuma.io/transparent-proxying-outbound-port": "x"},
			skip: kumaAt + "Kuma's default: annotation kuma.io/transparent-proxying-outbound-port is \"x\", not a port) for its transparent proxy's outbound traffic" + tail},
		{name: "kuma, no annotation", spec: kuma, skip: kumaAt + "Kuma's default) for its transparent proxy's outbound traffic" + tail},
		{name: "consul", spec: consul,
			skip: "PortConflict: spec.containers[1] (container consul-dataplane) is Consul's sidecar, whose Envoy listens on 127.0.0.1:15001 for its transparent proxy's outbound traffic (annotation consul.hashicorp.com/transparent-proxy is not set, on by Consul's default; \"false\" turns it off)" + tail},
		{name: "consul native", spec: consulNative, ann: map[string]string{"consul.hashicorp.com/transparent-proxy": "true"},
			skip: "PortConflict: spec.initContainers[1] (container consul-dataplane) is Consul's sidecar, whose Envoy listens on 127.0.0.1:15001 for its transparent proxy's outbound traffic (annotation consul.hashicorp.com/transparent-proxy is \"true\"; \"false\" turns it off)" + tail},
		{name: "consul, transparent proxy off", spec: consul, ann: map[string]string{"consul.hashicorp.com/transparent-proxy": "false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Annotations: tc.ann}, Spec: *tc.spec.DeepCopy()}
			nsLabels := map[string]string{"retrycap.dev/injection": "enabled"}
			if tc.kumaNS {
				nsLabels["kuma.io/sidecar-injection"] = "enabled"
			}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: nsLabels,
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			switch {
			case tc.skip == "" && !d.Injected:
				t.Fatalf("skipped: %q; want injected", d.Skip.String())
			case tc.skip != "" && (d.Injected || d.Skip.String() != tc.skip):
				t.Fatalf("injected %t, skip %v\nwant skip %q", d.Injected, d.Skip, tc.skip)
			}
		})
	}
}

// inject18: Kuma's injector, called after retrycap's (a release name that sorts before
// "kuma-admission-..."), adds kuma-sidecar on 15001: by Kuma's own rules, such a pod is skipped.
// On main it was injected and, with Kuma's sidecar added, never started.
func TestInject18KumaWillInject(t *testing.T) {
	const tail = ": Kuma's injector will add its sidecar kuma-sidecar, whose Envoy listens on port 15001 for its transparent proxy's outbound traffic: the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	for _, tc := range []struct {
		name       string
		ns, labels map[string]string
		skip       string
	}{
		{name: "namespace enabled", ns: map[string]string{"kuma.io/sidecar-injection": "enabled"}, skip: "PortConflict: namespace shop is labelled kuma.io/sidecar-injection=enabled" + tail},
		{name: "namespace true", ns: map[string]string{"kuma.io/sidecar-injection": "true"}, skip: "PortConflict: namespace shop is labelled kuma.io/sidecar-injection=true" + tail},
		{name: "namespace enabled, pod disabled", ns: map[string]string{"kuma.io/sidecar-injection": "enabled"}, labels: map[string]string{"kuma.io/sidecar-injection": "disabled"}},
		{name: "namespace enabled, pod yes", ns: map[string]string{"kuma.io/sidecar-injection": "enabled"}, labels: map[string]string{"kuma.io/sidecar-injection": "yes"},
			skip: "PortConflict: label kuma.io/sidecar-injection is \"yes\"" + tail},
		{name: "namespace disabled, pod enabled", ns: map[string]string{"kuma.io/sidecar-injection": "disabled"}, labels: map[string]string{"kuma.io/sidecar-injection": "enabled"},
			skip: "PortConflict: label kuma.io/sidecar-injection is \"enabled\"" + tail},
		// No webhook of Kuma's sees these pods.
		{name: "no namespace label, pod enabled", labels: map[string]string{"kuma.io/sidecar-injection": "enabled"}},
		{name: "namespace yes", ns: map[string]string{"kuma.io/sidecar-injection": "yes"}},
		{name: "namespace disabled, pod true", ns: map[string]string{"kuma.io/sidecar-injection": "disabled"}, labels: map[string]string{"kuma.io/sidecar-injection": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideIn(tc.ns, nil, tc.labels, nil)
			switch {
			case tc.skip == "" && !d.Injected:
				t.Fatalf("skipped: %q; want injected", d.Skip.String())
			case tc.skip != "" && (d.Injected || d.Skip.String() != tc.skip):
				t.Fatalf("injected %t, skip %v\nwant skip %q", d.Injected, d.Skip, tc.skip)
			}
		})
	}
}

// inject18: Consul's injector, called after retrycap's, adds consul-dataplane on 15001 to a pod
// annotated consul.hashicorp.com/connect-inject: "true": skipped unless its transparent proxy
// is off. On main it was injected and, with Consul's sidecar added, never started.
func TestInject18ConsulWillInject(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		skip string
	}{
		{ann: map[string]string{"consul.hashicorp.com/connect-inject": "true"},
			skip: "PortConflict: annotation consul.hashicorp.com/connect-inject is \"true\": Consul's injector will add its sidecar consul-dataplane, whose Envoy listens on 127.0.0.1:15001 for its transparent proxy's outbound traffic (annotation consul.hashicorp.com/transparent-proxy \"false\" turns it off): the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"},
		{ann: map[string]string{"consul.hashicorp.com/connect-inject": "true", "consul.hashicorp.com/transparent-proxy": "false"}},
		{ann: map[string]string{"consul.hashicorp.com/connect-inject": "false"}},
	} {
		d := decideIn(nil, nil, nil, tc.ann)
		switch {
		case tc.skip == "" && !d.Injected:
			t.Errorf("%v: skipped: %q; want injected", tc.ann, d.Skip.String())
		case tc.skip != "" && (d.Injected || d.Skip.String() != tc.skip):
			t.Errorf("%v: injected %t, skip %v\nwant skip %q", tc.ann, d.Injected, d.Skip, tc.skip)
		}
	}
}
