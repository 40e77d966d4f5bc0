package mesh

// MetaKey is a label or an annotation of a Namespace or a Service that the Set reads: one that
// puts workloads into a mesh layer (membership), binds a Service to a waypoint, or decides a
// port's protocol, a retry or a timeout. The mesh gate's webhook for Namespaces and Services
// (internal/webhook) is written from these lists: only a write that changes one of them reaches
// the manager.
type MetaKey struct {
	Mesh       Kind   // the mesh that reads it (Istio, Linkerd, Kuma)
	Annotation bool   // an annotation; else a label
	Key        string // the key; with Suffix, the end of every key read ("80.service.kuma.io/protocol")
	Suffix     bool
}

// NamespaceKeys are the keys of a Namespace's metadata the Set reads (layers.go InIstio,
// InLinkerd; inbound.go; waypoint.go; kuma.go kumaMeshOf; ports.go linkerdProtocol). Kuma's are
// labels only (kumainject.go: current Kuma reads no kuma.io/sidecar-injection annotation).
func NamespaceKeys() []MetaKey {
	return []MetaKey{
		{Mesh: Istio, Key: IstioInjectionLabel},
		{Mesh: Istio, Key: IstioRevLabel},
		{Mesh: Istio, Key: IstioDataplaneModeLabel},
		{Mesh: Istio, Key: IstioUseWaypointLabel},
		{Mesh: Istio, Key: IstioUseWaypointNamespaceLabel},
		{Mesh: Istio, Key: IstioIngressUseWaypointLabel},
		{Mesh: Kuma, Key: KumaSidecarInjection},
		{Mesh: Kuma, Key: KumaMeshLabel},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdInject},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdOpaquePorts},
	}
}

// WaypointGatewayKeys are the keys of a Gateway's metadata the Set reads when a waypoint label
// names it (waypoint.go serviceWaypoint); the rest it reads is its spec (class, listeners).
func WaypointGatewayKeys() []MetaKey {
	return []MetaKey{{Mesh: Istio, Key: IstioWaypointForLabel}}
}

// ServiceKeys are the keys of a Service's metadata the Set reads (waypoint.go serviceWaypoint,
// waypointEntry; objects.go linkerdRetries; time.go linkerdTimes; ports.go).
func ServiceKeys() []MetaKey {
	return []MetaKey{
		{Mesh: Istio, Key: IstioUseWaypointLabel},
		{Mesh: Istio, Key: IstioUseWaypointNamespaceLabel},
		{Mesh: Istio, Key: IstioIngressUseWaypointLabel},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryHTTP},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryGRPC},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryLimit},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryTimeout},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdTimeoutRequest},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdTimeoutResponse},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdTimeoutIdle},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdOpaquePorts},
		{Mesh: Kuma, Annotation: true, Key: KumaProtocolAnnotationSuffix, Suffix: true},
	}
}
