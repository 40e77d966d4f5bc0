package inject

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// inject18: a pod Linkerd injected in its classic mode (linkerd/linkerd2's own emojivoto pod,
// testdata/linkerd-classic-injected.yaml). On main it was injected: retrycap's native sidecar
// after linkerd-init, whose iptables send the kubelet's startup probe on 15020 to linkerd-proxy's
// 4143, where nothing listens until the init containers are done: the pod never started. It is
// skipped now, unless Linkerd leaves 15020 alone (linkerd-init's --inbound-ports-to-ignore, the
// pod's config.linkerd.io/skip-inbound-ports for Linkerd's CNI plugin) or its proxy is a native
// sidecar, started before retrycap's.
func TestInject18LinkerdClassicSidecar(t *testing.T) {
	const (
		cni  = "spec.containers[0] (container linkerd-proxy) is Linkerd's proxy as a regular container, started only after every init container, and Linkerd's CNI plugin redirects every inbound TCP port"
		tail = " to it: the kubelet's startup probe of the proxy on port 15020 would never be answered and the pod would never start (annotate the pod (its template) config.linkerd.io/skip-inbound-ports: \"15020\", or use Linkerd's native sidecar): the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	)
	base, err := readInput("testdata/linkerd-classic-injected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withInitArgs := func(v ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			a := p.Spec.InitContainers[0].Args
			i := slices.Index(a, "--inbound-ports-to-ignore")
			p.Spec.InitContainers[0].Args = append(slices.Clone(a[:i]), append(v, a[i+2:]...)...)
		}
	}
	noInit := func(p *corev1.Pod) { p.Spec.InitContainers = nil }
	annotate := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations["config.linkerd.io/skip-inbound-ports"] = v }
	}
	native := func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		proxy := p.Spec.Containers[0]
		proxy.RestartPolicy = &always
		p.Spec.InitContainers = append(p.Spec.InitContainers, proxy)
		p.Spec.Containers = p.Spec.Containers[1:]
	}
	for _, tc := range []struct {
		name  string
		edits []func(*corev1.Pod)
		skip  string // "" = injected
	}{
		{name: "as vendored", skip: "PortConflict: spec.containers[0] (container linkerd-proxy) is Linkerd's proxy as a regular container, started only after every init container, and spec.initContainers[0] (container linkerd-init) redirects every inbound TCP port but 4190,4191,4567,4568" + tail},
		{name: "linkerd-init skips 15020", edits: []func(*corev1.Pod){withInitArgs("--inbound-ports-to-ignore", "4190,4191,15020")}},
		{name: "linkerd-init skips a range, flag=value", edits: []func(*corev1.Pod){withInitArgs("--inbound-ports-to-ignore=4190, 15000-15100")}},
		{name: "linkerd-init skips a range ending below", edits: []func(*corev1.Pod){withInitArgs("--inbound-ports-to-ignore", "15000-15019,15021")},
			skip: "PortConflict: spec.containers[0] (container linkerd-proxy) is Linkerd's proxy as a regular container, started only after every init container, and spec.initContainers[0] (container linkerd-init) redirects every inbound TCP port but 15000-15019,15021" + tail},
		{name: "CNI, no annotation", edits: []func(*corev1.Pod){noInit}, skip: "PortConflict: " + cni + tail},
		{name: "CNI, annotation skips 15020", edits: []func(*corev1.Pod){noInit, annotate("15020")}},
		{name: "CNI, annotation not a port", edits: []func(*corev1.Pod){noInit, annotate("15020x,admin")}, skip: "PortConflict: " + cni + " but 15020x,admin" + tail},
		{name: "native sidecar", edits: []func(*corev1.Pod){native}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			in.Pod = base.Pod.DeepCopy()
			for _, e := range tc.edits {
				e(in.Pod)
			}
			d := Decide(testConfig, in)
			switch {
			case tc.skip == "" && !d.Injected:
				t.Fatalf("skipped: %q; want injected", d.Skip.String())
			case tc.skip != "" && (d.Injected || d.Skip.String() != tc.skip):
				t.Fatalf("injected %t, skip %v\nwant skip %q", d.Injected, d.Skip, tc.skip)
			case tc.skip == "":
				// After Linkerd's init containers, which answer for the network by then.
				last := d.Pod.Spec.InitContainers[len(d.Pod.Spec.InitContainers)-1]
				if last.Name != ContainerName {
					t.Fatalf("last init container %s, want %s", last.Name, ContainerName)
				}
			}
		})
	}
}
