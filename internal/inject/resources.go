package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/retrycap/retrycap/internal/annotations"
)

// The sidecar's default requests and limits (ProxyCPULimit is the CPU limit), and the bounds of
// the memory limit an annotation may set.
const (
	ProxyCPURequest    = "10m"
	ProxyMemoryRequest = "32Mi"
	ProxyMemoryLimit   = "64Mi"
	// MinProxyMemoryLimit is the least memory limit the proxy is given: it holds about 18 MiB
	// idle (docs/benchmarks.md), so under a lower limit it would be killed for memory
	// (OOMKilled) at or soon after its start, and, a native sidecar whose startup probe gates
	// the app's containers, keep the whole pod from starting. Refused, not warned of: such a
	// pod can never run.
	MinProxyMemoryLimit = "20Mi"
	// LowProxyMemoryLimit is the memory limit below which the injector warns: the proxy holds
	// up to about 23 MiB under load (its bound is 30 MiB), so a limit between it and
	// MinProxyMemoryLimit runs idle and may be killed for memory under load.
	LowProxyMemoryLimit = "32Mi"
)

// resourceKnob is one of the proxy's resource annotations and the default it replaces.
type resourceKnob struct {
	key   string
	name  corev1.ResourceName
	limit bool
	def   string
	what  string // "CPU request", in messages
}

var resourceKnobs = [...]resourceKnob{
	{annotations.ProxyCPURequest, corev1.ResourceCPU, false, ProxyCPURequest, "CPU request"},
	{annotations.ProxyCPULimit, corev1.ResourceCPU, true, ProxyCPULimit, "CPU limit"},
	{annotations.ProxyMemoryRequest, corev1.ResourceMemory, false, ProxyMemoryRequest, "memory request"},
	{annotations.ProxyMemoryLimit, corev1.ResourceMemory, true, ProxyMemoryLimit, "memory limit"},
}

// proxyResources is the sidecar's requests and limits and its GOMAXPROCS for a pod annotated
// ann: the defaults, each replaced by its annotation (annotations.ProxyResources) where set.
// who names the pod's workload in the errors, which name the annotation and its value too. The
// rules:
//   - each value is a Kubernetes quantity, not negative, and a limit is above 0;
//   - a memory limit is at least MinProxyMemoryLimit (below LowProxyMemoryLimit: a warning);
//   - a request is at most its limit. A limit set below the default request, the request not
//     set, lowers the request to the limit (Kubernetes' own default for a missing request), so
//     that one annotation fits a LimitRange's max; a request set above the default limit, the
//     limit not set, is refused: a limit is never raised silently, since a raised limit is what
//     a LimitRange's max or a quota on limits refuses;
//   - GOMAXPROCS follows a CPU limit annotation: its ceiling, at least 1, at most ProxyThreads
//     (2). Go would otherwise run two threads' work in one CPU's quota and be throttled.
func proxyResources(who string, ann map[string]string) (res corev1.ResourceRequirements, threads string, warnings []string, err error) {
	res = corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	set := map[string]bool{}
	for _, k := range resourceKnobs {
		list := res.Requests
		if k.limit {
			list = res.Limits
		}
		v, ok := ann[k.key]
		if !ok {
			list[k.name] = resource.MustParse(k.def)
			continue
		}
		q, perr := resource.ParseQuantity(v)
		switch {
		case perr != nil:
			return res, "", nil, fmt.Errorf("%s: annotation %s %q is not a Kubernetes quantity (such as 500m, 1 or 48Mi): %w", who, k.key, v, perr)
		case q.Sign() < 0:
			return res, "", nil, fmt.Errorf("%s: annotation %s %q: the proxy's %s must not be negative", who, k.key, v, k.what)
		case k.limit && q.Sign() == 0:
			return res, "", nil, fmt.Errorf("%s: annotation %s %q: the proxy's %s must be above 0 (without the annotation it is %s)", who, k.key, v, k.what, k.def)
		case k.limit && k.name == corev1.ResourceMemory && q.Cmp(resource.MustParse(MinProxyMemoryLimit)) < 0:
			return res, "", nil, fmt.Errorf("%s: annotation %s %q is below %s, the least the proxy runs in: it holds about 18 MiB idle, so it would be killed for memory (OOMKilled) before it served", who, k.key, v, MinProxyMemoryLimit)
		case k.limit && k.name == corev1.ResourceMemory && q.Cmp(resource.MustParse(LowProxyMemoryLimit)) < 0:
			warnings = append(warnings, fmt.Sprintf("annotation %s %q is below %s: the proxy holds up to about 23 MiB under load, so it may be killed for memory (OOMKilled) under load", k.key, v, LowProxyMemoryLimit))
		}
		list[k.name] = q
		set[k.key] = true
	}
	for i := 0; i < len(resourceKnobs); i += 2 {
		rk, lk := resourceKnobs[i], resourceKnobs[i+1]
		req, lim := res.Requests[rk.name], res.Limits[lk.name]
		if req.Cmp(lim) <= 0 {
			continue
		}
		switch {
		case !set[rk.key]:
			res.Requests[rk.name] = lim.DeepCopy()
		case set[lk.key]:
			return res, "", nil, fmt.Errorf("%s: annotation %s %q is above annotation %s %q: the proxy's %s may not exceed its %s",
				who, rk.key, ann[rk.key], lk.key, ann[lk.key], rk.what, lk.what)
		default:
			return res, "", nil, fmt.Errorf("%s: annotation %s %q is above the proxy's default %s %s: a request may not exceed its limit; set %s too",
				who, rk.key, ann[rk.key], lk.what, lk.def, lk.key)
		}
	}
	threads = ProxyThreads
	if set[annotations.ProxyCPULimit] && res.Limits.Cpu().Cmp(resource.MustParse("1")) <= 0 {
		threads = "1"
	}
	return res, threads, warnings, nil
}
