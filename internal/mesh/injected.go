package mesh

import "slices"

// Manifests already injected (DESIGN.md, "Real inputs, third round"): `istioctl kube-inject`
// and `linkerd inject --manual` write the proxy into the pod template, so the output is meshed
// whatever its namespace's labels say (and the injector will not inject it again). Istio's
// injector marks what it injected with the annotation sidecar.istio.io/status
// (pkg/kube/inject/inject.go, annotation.SidecarStatus) and names its container istio-proxy
// (an init container when it runs as a native sidecar); Linkerd's proxy injector sets
// linkerd.io/proxy-version (pkg/k8s/labels.go, ProxyVersionAnnotation) and names its container
// linkerd-proxy (pkg/k8s/labels.go, ProxyContainerName).

// Keys and names that mark an injected pod template.
const (
	IstioSidecarStatus    = "sidecar.istio.io/status"
	IstioProxyContainer   = "istio-proxy"
	LinkerdProxyVersion   = "linkerd.io/proxy-version"
	LinkerdProxyContainer = "linkerd-proxy"
)

// injectedIstio: the caller's pod template already carries Istio's sidecar. An istio-proxy
// container in a pod template that opts out of injection (sidecar.istio.io/inject "false", the
// label winning over the annotation) is not one: Istio's injector, webhook and kube-inject alike
// (pkg/kube/inject injectRequired), never injects such a pod, and ztunnel's DaemonSet names its
// own container istio-proxy with exactly that opt-out (istio/istio eed52ebb66ad
// manifests/charts/ztunnel/templates/daemonset.yaml): the node proxy, not a sidecar.
func injectedIstio(c Caller) bool {
	if _, ok := c.Annotations[IstioSidecarStatus]; ok {
		return true
	}
	optOut := c.Annotations[IstioInjectAnnotation]
	if v, ok := c.Labels[IstioInjectAnnotation]; ok {
		optOut = v
	}
	return optOut != "false" && slices.Contains(c.Containers, IstioProxyContainer)
}

// injectedLinkerd: the caller's pod template already carries Linkerd's proxy.
func injectedLinkerd(c Caller) bool {
	_, ok := c.Annotations[LinkerdProxyVersion]
	return ok || slices.Contains(c.Containers, LinkerdProxyContainer)
}

// IsProxyContainer reports whether a container name is a mesh's proxy that marks a pod template
// as already injected: what a workload keeps of its containers for Caller.Containers.
func IsProxyContainer(name string) bool {
	return name == IstioProxyContainer || name == LinkerdProxyContainer
}
