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

// injectedIstio: the caller's pod template already carries Istio's sidecar.
func injectedIstio(c Caller) bool {
	_, ok := c.Annotations[IstioSidecarStatus]
	return ok || slices.Contains(c.Containers, IstioProxyContainer)
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
