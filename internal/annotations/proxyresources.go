package annotations

// The proxy's resources, per workload or per namespace: on the pod template (or a bare Pod), or
// on the pod's Namespace as the default for its pods (the pod's own annotation wins), each a
// Kubernetes quantity ("500m", "1", "48Mi") that replaces the injected sidecar's default request
// or limit, so that a namespace's LimitRange (a min, a max, a maxLimitRequestRatio) can admit the
// injected pod. internal/workload has the rules (ParseProxyResourcesIn), internal/inject applies
// them; docs/admission.md.
const (
	// ProxyCPURequest is the sidecar's CPU request (default 10m).
	ProxyCPURequest = "retrycap.dev/proxy-cpu-request"
	// ProxyCPULimit is the sidecar's CPU limit (default 2); GOMAXPROCS follows it.
	ProxyCPULimit = "retrycap.dev/proxy-cpu-limit"
	// ProxyMemoryRequest is the sidecar's memory request (default 32Mi).
	ProxyMemoryRequest = "retrycap.dev/proxy-memory-request"
	// ProxyMemoryLimit is the sidecar's memory limit (default 64Mi).
	ProxyMemoryLimit = "retrycap.dev/proxy-memory-limit"
)

// ProxyResources are the four proxy resource annotations, in the order the injector checks them.
// The gate's list of the annotations retrycap reads (workload.ReadAnnotations) needs them, else
// it warns that they are ignored.
var ProxyResources = []string{ProxyCPURequest, ProxyCPULimit, ProxyMemoryRequest, ProxyMemoryLimit}
