package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// The skips the golden files do not reach: node affinity, the ports that do not clash (UDP, a
// probe on another host, a named port), and pods with no app container.
func TestConflictsAndOddShapes(t *testing.T) {
	osIn := func(values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: values}}}
	}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	app := func(mut func(*corev1.Container)) []corev1.Container {
		c := corev1.Container{Name: "app", Image: "example/app:v1"}
		if mut != nil {
			mut(&c)
		}
		return []corev1.Container{c}
	}
	const ports = ": the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	for _, tt := range []struct {
		name string
		spec corev1.PodSpec
		want string // the skip, "" for injected
	}{
		{"windows-only affinity", corev1.PodSpec{Containers: app(nil), Affinity: affinity(osIn("windows"), osIn("windows"))},
			"WindowsPod: every term of spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution requires os In [windows]: the proxy's image is a Linux one, which a Windows node cannot run"},
		{"affinity allowing linux", corev1.PodSpec{Containers: app(nil), Affinity: affinity(osIn("windows"), osIn("linux"))}, ""},
		{"affinity on both", corev1.PodSpec{Containers: app(nil), Affinity: affinity(osIn("windows", "linux"))}, ""},
		{"beta os label", corev1.PodSpec{Containers: app(nil), NodeSelector: map[string]string{"beta.kubernetes.io/os": "windows"}},
			`WindowsPod: spec.nodeSelector beta.kubernetes.io/os is "windows": the proxy's image is a Linux one, which a Windows node cannot run`},
		{"linux pod", corev1.PodSpec{Containers: app(nil), OS: &corev1.PodOS{Name: corev1.Linux}, NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}}, ""},
		{"udp 15020", corev1.PodSpec{Containers: app(func(c *corev1.Container) {
			c.Ports = []corev1.ContainerPort{{ContainerPort: 15020, Protocol: corev1.ProtocolUDP}}
		})}, ""},
		{"probe on another host", corev1.PodSpec{Containers: app(func(c *corev1.Container) {
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1", Port: intstr.FromInt32(15020)}}}
		})}, ""},
		{"named probe port", corev1.PodSpec{Containers: app(func(c *corev1.Container) {
			c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}
		})}, ""},
		{"grpc startup probe", corev1.PodSpec{Containers: app(func(c *corev1.Container) {
			c.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 15020}}}
		})}, "PortConflict: spec.containers[0] (container app) startupProbe.grpc.port is 15020" + ports},
		{"preStop hook", corev1.PodSpec{Containers: app(func(c *corev1.Container) {
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15001)}}}
		})}, "PortConflict: spec.containers[0] (container app) lifecycle.preStop.tcpSocket.port is 15001" + ports},
		{"native sidecar on 15001", corev1.PodSpec{Containers: app(nil), InitContainers: []corev1.Container{{Name: "egress", Image: "example/egress:v1",
			RestartPolicy: new(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{{ContainerPort: 15001}}}}},
			"PortConflict: spec.initContainers[0] (container egress) ports[0].containerPort is 15001" + ports},
		// No app container (the API server refuses such a pod after the webhooks) and only init
		// containers: injected without a panic; no container gets the proxy env.
		{"no containers", corev1.PodSpec{}, ""},
		{"only init containers", corev1.PodSpec{InitContainers: app(nil)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{
				Pod:             &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"}, Spec: tt.spec},
				NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"},
				Policies:        []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}},
			}
			d := Decide(testConfig, in)
			if tt.want == "" {
				if !d.Injected {
					t.Fatalf("skipped: %v; want injected", d.Skip)
				}
				last := d.Pod.Spec.InitContainers[len(d.Pod.Spec.InitContainers)-1]
				if last.Name != ContainerName || len(d.Pod.Spec.InitContainers) != len(tt.spec.InitContainers)+1 {
					t.Fatalf("init containers %d, last %s; want the pod's %d and %s last", len(d.Pod.Spec.InitContainers), last.Name, len(tt.spec.InitContainers), ContainerName)
				}
				for i, c := range d.Pod.Spec.InitContainers[:len(tt.spec.InitContainers)] {
					if len(c.Env) != 0 {
						t.Errorf("init container %d got env %v; the proxy is not up while it runs", i, c.Env)
					}
				}
				return
			}
			if d.Injected || d.Skip.String() != tt.want {
				t.Fatalf("got injected %t, skip %q\nwant skip %q", d.Injected, d.Skip, tt.want)
			}
			if got := d.Pod.Annotations[SkippedAnnotation]; got != tt.want {
				t.Errorf("annotation %s = %q, want %q", SkippedAnnotation, got, tt.want)
			}
		})
	}
}

// Istio's ambient mode, by the pod's label or the namespace's (a pod may opt out with "none"):
// ztunnel listens on *:15001 inside the pod (istio.io docs, ambient traffic redirection: ss -ntlp
// in a captured pod), so the proxy could not bind its data port and the app would never start.
func TestAmbientPods(t *testing.T) {
	const ztunnel = ": Istio's ztunnel listens on *:15001, *:15006 and *:15008 inside every pod it captures: the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	for _, tt := range []struct {
		name          string
		pod, ns, want string // the labels' istio.io/dataplane-mode ("" unset); the skip, "" for injected
	}{
		{"pod ambient", "ambient", "", `PortConflict: label istio.io/dataplane-mode is "ambient"` + ztunnel},
		{"namespace ambient", "", "ambient", "PortConflict: namespace shop is labelled istio.io/dataplane-mode=ambient" + ztunnel},
		{"pod opts out", "none", "ambient", ""},
		{"neither", "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Labels: map[string]string{}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
			nsLabels := map[string]string{"retrycap.dev/injection": "enabled"}
			if tt.pod != "" {
				pod.Labels["istio.io/dataplane-mode"] = tt.pod
			}
			if tt.ns != "" {
				nsLabels["istio.io/dataplane-mode"] = tt.ns
			}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: nsLabels,
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			got := ""
			if !d.Injected {
				got = d.Skip.String()
			}
			if got != tt.want {
				t.Fatalf("skip %q\nwant %q", got, tt.want)
			}
		})
	}
}
