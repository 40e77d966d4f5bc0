package workload

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/retrycap/retrycap/internal/annotations"
)

// The sidecar's default threads, requests and limits, and the bounds of the memory limit an
// annotation may set. They are here, with the other annotation rules (AnnotationErrors), so
// that the gate and analyze refuse what the injector would skip a pod for; internal/inject
// renders them.
const (
	// ProxyThreads is the sidecar's GOMAXPROCS: its event loops and Go's threads.
	ProxyThreads = "2"
	// ProxyCPULimit is the sidecar's CPU limit: its ProxyThreads event loops (the spare P the
	// proxy adds while they are busy, internal/proxy/spareproc.go, shares it). Not 3, all it could
	// use: a LimitRange's per-container max of 2 CPUs (as common as a quota on limits.cpu) would
	// refuse the pod, "maximum cpu usage per Container is 2, but limit is 3". Istio's default.
	ProxyCPULimit      = "2"
	ProxyCPURequest    = "10m"
	ProxyMemoryRequest = "32Mi"
	ProxyMemoryLimit   = "64Mi"
	// MinProxyMemoryLimit is the least memory limit the proxy is given: it holds about 18 MiB
	// idle (docs/benchmarks.md), so under a lower limit it would be killed for memory
	// (OOMKilled) at or soon after its start and, a native sidecar whose startup probe gates
	// the app's containers, keep the whole pod from starting. Refused, not warned of: such a
	// pod never runs.
	MinProxyMemoryLimit = "20Mi"
	// LowProxyMemoryLimit is the memory limit below which the injector warns: the proxy holds
	// up to about 23 MiB under load (its bound is 30 MiB), so a limit between
	// MinProxyMemoryLimit and it runs idle and may be killed for memory under load.
	LowProxyMemoryLimit = "32Mi"
)

// ProxyResources is what a pod template's proxy resource annotations (annotations.ProxyResources)
// make of the sidecar's resources.
type ProxyResources struct {
	// Requests and Limits hold cpu and memory, each the default or the annotation's value.
	Requests, Limits corev1.ResourceList
	// Threads is the sidecar's GOMAXPROCS: ProxyThreads, or the ceiling of a CPU limit
	// annotation, at least 1, at most ProxyThreads.
	Threads string
	// Warnings are on values accepted that may not serve (a low memory limit).
	Warnings []string
}

// ResourceError is a proxy resource annotation's value the rules refuse. Its text names the
// annotation and the value, not the workload: the caller prefixes it.
type ResourceError struct {
	Annotation string
	Value      string
	// Namespace is the Namespace the value was taken from (ParseProxyResourcesIn), "" for the
	// pod's own.
	Namespace string
	msg       string
}

func (e *ResourceError) Error() string { return e.msg }

type resourceKnob struct {
	key   string
	name  corev1.ResourceName
	limit bool
	def   string
	what  string // "CPU request", in messages
}

// resourceKnobs are in annotations.ProxyResources' order: a request, then its limit.
var resourceKnobs = [...]resourceKnob{
	{annotations.ProxyCPURequest, corev1.ResourceCPU, false, ProxyCPURequest, "CPU request"},
	{annotations.ProxyCPULimit, corev1.ResourceCPU, true, ProxyCPULimit, "CPU limit"},
	{annotations.ProxyMemoryRequest, corev1.ResourceMemory, false, ProxyMemoryRequest, "memory request"},
	{annotations.ProxyMemoryLimit, corev1.ResourceMemory, true, ProxyMemoryLimit, "memory limit"},
}

// ParseProxyResources reads the sidecar's resources from a pod template's annotations ann: the
// defaults, each replaced by its annotation where set. The injector applies it; the workload
// gate and analyze judge a template by it (AnnotationErrors) (the first broken rule is a
// *ResourceError). The rules, checked in the annotations' order:
//   - each value is a Kubernetes quantity, not negative, and a limit is above 0;
//   - a memory limit is at least MinProxyMemoryLimit (below LowProxyMemoryLimit: a warning);
//   - a request is at most its limit. A limit set below the default request, the request not
//     set, lowers the request to the limit (Kubernetes' own default for a missing request), so
//     that one annotation fits a LimitRange's max; a request set above the default limit, the
//     limit not set, is refused: a limit is never raised silently, since a raised limit is what
//     a LimitRange's max or a quota on limits refuses;
//   - GOMAXPROCS follows a CPU limit annotation: its ceiling, at least 1, at most ProxyThreads
//     (2). Go would otherwise run two threads' work in one CPU's quota and be throttled.
func ParseProxyResources(ann map[string]string) (ProxyResources, error) {
	return parseProxyResources(ann, "", nil)
}

// ParseProxyResourcesIn is ParseProxyResources for a pod of namespace ns whose Namespace has
// annotations nsAnn: each of the four the pod does not set is taken from the Namespace (as
// Linkerd's config.linkerd.io/proxy-* annotations are; the pod's own wins), and the rules are
// then applied to the whole; a Namespace's request above a limit the pod sets is lowered to it,
// as the default request is. A value taken from the Namespace is named as such in an error or
// a warning (`annotation K "v" of Namespace ns`), and its *ResourceError has Namespace set.
func ParseProxyResourcesIn(ns string, nsAnn, ann map[string]string) (ProxyResources, error) {
	merged := map[string]string{}
	fromNS := map[string]bool{}
	for _, k := range resourceKnobs {
		if v, ok := ann[k.key]; ok {
			merged[k.key] = v
		} else if v, ok := nsAnn[k.key]; ok {
			merged[k.key] = v
			fromNS[k.key] = true
		}
	}
	return parseProxyResources(merged, ns, fromNS)
}

// parseProxyResources applies the rules to ann, whose keys in fromNS came from Namespace ns.
func parseProxyResources(ann map[string]string, ns string, fromNS map[string]bool) (ProxyResources, error) {
	r := ProxyResources{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}, Threads: ProxyThreads}
	set := map[string]bool{}
	quote := func(key string) string {
		if fromNS[key] {
			return fmt.Sprintf("annotation %s %q of Namespace %s", key, ann[key], ns)
		}
		return fmt.Sprintf("annotation %s %q", key, ann[key])
	}
	bad := func(k resourceKnob, format string, a ...any) error {
		e := &ResourceError{Annotation: k.key, Value: ann[k.key], msg: quote(k.key) + fmt.Sprintf(format, a...)}
		if fromNS[k.key] {
			e.Namespace = ns
		}
		return e
	}
	for _, k := range resourceKnobs {
		list := r.Requests
		if k.limit {
			list = r.Limits
		}
		v, ok := ann[k.key]
		if !ok {
			list[k.name] = resource.MustParse(k.def)
			continue
		}
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil:
			return r, bad(k, " is not a Kubernetes quantity (such as 500m, 1 or 48Mi): %v", err)
		case q.Sign() < 0:
			return r, bad(k, ": the proxy's %s must not be negative", k.what)
		case k.limit && q.Sign() == 0:
			return r, bad(k, ": the proxy's %s must be above 0 (without the annotation it is %s)", k.what, k.def)
		case k.limit && k.name == corev1.ResourceMemory && q.Cmp(resource.MustParse(MinProxyMemoryLimit)) < 0:
			return r, bad(k, " is below %s, the least the proxy runs in: it holds about 18 MiB idle, so it would be killed for memory (OOMKilled) before it served", MinProxyMemoryLimit)
		case k.limit && k.name == corev1.ResourceMemory && q.Cmp(resource.MustParse(LowProxyMemoryLimit)) < 0:
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s is below %s: the proxy holds up to about 23 MiB under load, so it may be killed for memory (OOMKilled) under load", quote(k.key), LowProxyMemoryLimit))
		}
		list[k.name] = q
		set[k.key] = true
	}
	for i := 0; i < len(resourceKnobs); i += 2 {
		rk, lk := resourceKnobs[i], resourceKnobs[i+1]
		req, lim := r.Requests[rk.name], r.Limits[lk.name]
		if req.Cmp(lim) <= 0 {
			continue
		}
		switch {
		case !set[rk.key], fromNS[rk.key] && set[lk.key] && !fromNS[lk.key]:
			// A request the pod does not set (the default, or its Namespace's default) above
			// the limit the pod sets is lowered to it, as Kubernetes fills a missing request
			// from the limit: the pod's own value wins over a default.
			r.Requests[rk.name] = lim.DeepCopy()
		case set[lk.key]:
			return r, bad(rk, " is above %s: the proxy's %s may not exceed its %s", quote(lk.key), rk.what, lk.what)
		default:
			return r, bad(rk, " is above the proxy's default %s %s: a request may not exceed its limit; set %s too", lk.what, lk.def, lk.key)
		}
	}
	// The ceiling of the limit, from 1 to ProxyThreads (2): two cases, compared as quantities
	// (a limit of 1e18 CPUs does not fit a count of millicores).
	if set[annotations.ProxyCPULimit] && r.Limits.Cpu().Cmp(resource.MustParse("1")) <= 0 {
		r.Threads = "1"
	}
	return r, nil
}
