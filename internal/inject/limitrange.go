package inject

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/retrycap/retrycap/internal/annotations"
)

// proxyResourceAnnotation is the annotation that sets the proxy's request (or limit) of r, one
// of the two resources the proxy sets.
func proxyResourceAnnotation(r corev1.ResourceName, limit bool) string {
	switch {
	case r == corev1.ResourceCPU && !limit:
		return annotations.ProxyCPURequest
	case r == corev1.ResourceCPU:
		return annotations.ProxyCPULimit
	case r == corev1.ResourceMemory && !limit:
		return annotations.ProxyMemoryRequest
	case r == corev1.ResourceMemory:
		return annotations.ProxyMemoryLimit
	}
	return ""
}

// limitRangeRefuses says which item of which LimitRange of namespace ns the API server's
// LimitRanger would refuse the pod by once the proxy container c is added to it, or "". The
// LimitRanger judges the pod after the webhooks (and, reinvoked, fills in only what the proxy does
// not set), so a proxy whose own values, or the pod's sums with them, break an item's min, max or
// maxLimitRequestRatio made the pod refused whole, so that no pod of the workload was created (its
// ReplicaSet's events said only "minimum cpu usage per Container is 50m, but request is 10m").
// Skipped instead, the app runs without the proxy, and the skip names the LimitRange, the item,
// the bound and the value, and the annotation that changes it. The rules are the LimitRanger's
// (k8s.io/kubernetes plugin/pkg/admission/limitranger, minConstraint, maxConstraint,
// limitRequestRatioConstraint), on the proxy as the LimitRanger stores it (its own CPU and memory,
// and the LimitRanges' Container defaults for what it does not set: withLimitRangeDefaults): for
// items of type Container against the proxy's resources, for items of type Pod against the pod's
// sums with the proxy (podItemRefuses), on every resource the item bounds.
func limitRangeRefuses(ns string, ranges []corev1.LimitRange, pod *corev1.Pod, c corev1.Container) string {
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(a, b corev1.LimitRange) int { return strings.Compare(a.Name, b.Name) })
	c, defaulted := withLimitRangeDefaults(ns, sorted, c)
	for _, lr := range sorted {
		for i, item := range lr.Spec.Limits {
			why := ""
			switch item.Type {
			case corev1.LimitTypeContainer:
				why = containerItemRefuses(item, c.Resources, defaulted)
			case corev1.LimitTypePod:
				why = podItemRefuses(item, pod, c, defaulted)
			default:
				continue
			}
			if why != "" {
				return fmt.Sprintf("LimitRange %s/%s spec.limits[%d] (type %s) %s: the API server would refuse the pod", ns, lr.Name, i, item.Type, why)
			}
		}
	}
	return ""
}

// defaultedKey names one of the proxy's requests (limit false) or limits of a resource that the
// LimitRanger fills in from a LimitRange's defaults.
type defaultedKey struct {
	r     corev1.ResourceName
	limit bool
}

// withLimitRangeDefaults is the proxy c as the LimitRanger, reinvoked after the webhooks, stores
// it: each LimitRange's Container defaults (default, defaultRequest; a later Container item of
// one LimitRange over an earlier one) fill in what the proxy does not set, the first LimitRange
// (here in name order; the LimitRanger takes its cache's order) before the others. The proxy sets
// CPU and memory, so what is filled in is ephemeral-storage or an extended resource, which no
// annotation of retrycap's sets; defaulted says where each came from, for the skip's message.
// Judged without them, a Pod item's max ephemeral-storage that the app's defaulted limit reached
// was broken by the proxy's defaulted one, and the API server refused every pod of the workload
// ("maximum ephemeral-storage usage per Pod is 1Gi, but limit is 2Gi", on the real node).
func withLimitRangeDefaults(ns string, sorted []corev1.LimitRange, c corev1.Container) (corev1.Container, map[defaultedKey]string) {
	c = *c.DeepCopy()
	defaulted := map[defaultedKey]string{}
	for _, lr := range sorted {
		req, lim := corev1.ResourceList{}, corev1.ResourceList{}
		from := map[defaultedKey]int{}
		for i, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			for r, q := range item.DefaultRequest {
				req[r] = q
				from[defaultedKey{r, false}] = i
			}
			for r, q := range item.Default {
				lim[r] = q
				from[defaultedKey{r, true}] = i
			}
		}
		fill := func(to *corev1.ResourceList, defaults corev1.ResourceList, limit bool) {
			for _, r := range sortedNames(defaults) {
				if _, ok := (*to)[r]; ok {
					continue
				}
				if *to == nil {
					*to = corev1.ResourceList{}
				}
				(*to)[r] = defaults[r].DeepCopy()
				k := defaultedKey{r, limit}
				defaulted[k] = fmt.Sprintf("LimitRange %s/%s spec.limits[%d]", ns, lr.Name, from[k])
			}
		}
		fill(&c.Resources.Limits, lim, true)
		fill(&c.Resources.Requests, req, false)
	}
	return c, defaulted
}

// fixFor is what changes the proxy's request (or limit) of r: the annotation that sets it, or,
// for a value the LimitRanger gives it from a LimitRange's defaults, that LimitRange.
func fixFor(r corev1.ResourceName, limit bool, defaulted map[defaultedKey]string) string {
	if a := proxyResourceAnnotation(r, limit); a != "" {
		return "set the annotation " + a + " on the pod's template or its Namespace"
	}
	what := "request"
	if limit {
		what = "limit"
	}
	if from, ok := defaulted[defaultedKey{r, limit}]; ok {
		return fmt.Sprintf("the proxy's %s %s is the default of %s, which the API server gives it; no annotation of retrycap's sets it", r, what, from)
	}
	return fmt.Sprintf("no annotation of retrycap's sets the proxy's %s %s", r, what)
}

// podItemRefuses is the first bound of an item of type Pod that the pod breaks with the proxy c
// and keeps without it, with both values and the annotation that changes the proxy's, or "". The
// LimitRanger judges such an item on the pod's sums (podSums), to which the proxy, a native
// sidecar, adds its requests and limits. A bound the pod breaks without the proxy is not the
// proxy's doing: the API server refuses that pod either way, and the skip would blame retrycap.
func podItemRefuses(item corev1.LimitRangeItem, pod *corev1.Pod, c corev1.Container, defaulted map[defaultedKey]string) string {
	with := pod.DeepCopy()
	with.Spec.InitContainers = append(with.Spec.InitContainers, c)
	podLevelRoom(with, c.Resources.Requests)
	reqBefore, limBefore := podSums(pod)
	reqAfter, limAfter := podSums(with)
	names := map[corev1.ResourceName]bool{}
	for _, l := range []corev1.ResourceList{item.Min, item.Max, item.MaxLimitRequestRatio} {
		for r := range l {
			names[r] = true
		}
	}
	var resources []corev1.ResourceName
	for r := range names {
		resources = append(resources, r)
	}
	slices.Sort(resources)
	for _, r := range resources {
		for _, b := range []struct {
			name  string
			bound corev1.ResourceList
		}{{"min", item.Min}, {"max", item.Max}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}} {
			v, ok := b.bound[r]
			if !ok {
				continue
			}
			broken, limit := podBoundBroken(b.name, v, reqAfter, limAfter, r)
			if !broken {
				continue
			}
			if was, _ := podBoundBroken(b.name, v, reqBefore, limBefore, r); was {
				continue
			}
			what, before, after, own := "request", reqBefore, reqAfter, c.Resources.Requests
			if limit {
				what, before, after, own = "limit", limBefore, limAfter, c.Resources.Limits
			}
			if b.name == "maxLimitRequestRatio" {
				return fmt.Sprintf("maxLimitRequestRatio %s is %s, and the pod's %s limit over its request is %s with the proxy (%s over %s), %s without it (%s)",
					r, v.String(), r, ratioOf(reqAfter, limAfter, r), qty(limAfter, r), qty(reqAfter, r), ratioOf(reqBefore, limBefore, r), fixFor(r, false, defaulted))
			}
			return fmt.Sprintf("%s %s is %s, and the pod's %s %s is %s with the proxy (whose %s is %s), %s without it (%s)",
				b.name, r, v.String(), r, what, qty(after, r), what, qty(own, r), qty(before, r), fixFor(r, limit, defaulted))
		}
	}
	return ""
}

// podBoundBroken reports whether the pod's sums break bound v of kind (min, max,
// maxLimitRequestRatio) on r, as the LimitRanger's constraints do (a missing request or limit
// breaks it as there), and whether it is the limit that breaks it.
func podBoundBroken(kind string, v resource.Quantity, req, lim corev1.ResourceList, r corev1.ResourceName) (broken, limit bool) {
	rq, hasReq := req[r]
	lm, hasLim := lim[r]
	switch kind {
	case "min":
		if !hasReq || rq.Cmp(v) < 0 {
			return true, false
		}
		return hasLim && lm.Cmp(v) < 0, true
	case "max":
		if !hasLim || lm.Cmp(v) > 0 {
			return true, true
		}
		return hasReq && rq.Cmp(v) > 0, false
	default:
		if !hasReq || rq.IsZero() || !hasLim || lm.IsZero() {
			return true, false
		}
		return float64(lm.MilliValue())/float64(rq.MilliValue()) > float64(v.MilliValue())/1000, false
	}
}

func qty(l corev1.ResourceList, r corev1.ResourceName) string {
	if q, ok := l[r]; ok {
		return q.String()
	}
	return "unset"
}

func ratioOf(req, lim corev1.ResourceList, r corev1.ResourceName) string {
	rq, lm := req[r], lim[r]
	if rq.IsZero() || lm.IsZero() {
		return "unset"
	}
	return strconv.FormatFloat(float64(lm.MilliValue())/float64(rq.MilliValue()), 'g', 4, 64)
}

// podSums are the pod's requests and limits as the LimitRanger sums them for an item of type
// Pod (its podRequests and podLimits, from the spec): the app containers' sum with the native
// sidecars', or the largest init container with the sidecars started before it where that is
// more; pod-level resources (spec.resources) replace the sums of CPU and memory where set
// (PodLevelResources, on by default since Kubernetes 1.34).
func podSums(pod *corev1.Pod) (req, lim corev1.ResourceList) {
	sum := func(get func(corev1.Container) corev1.ResourceList, level corev1.ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		for _, c := range pod.Spec.Containers {
			addList(out, get(c))
		}
		sidecars, inits := corev1.ResourceList{}, corev1.ResourceList{}
		for _, c := range pod.Spec.InitContainers {
			cur := corev1.ResourceList{}
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				addList(out, get(c))
				addList(sidecars, get(c))
				addList(cur, sidecars)
			} else {
				addList(cur, get(c))
				addList(cur, sidecars)
			}
			for n, q := range cur {
				if old, ok := inits[n]; !ok || q.Cmp(old) > 0 {
					inits[n] = q.DeepCopy()
				}
			}
		}
		for n, q := range inits {
			if old, ok := out[n]; !ok || q.Cmp(old) > 0 {
				out[n] = q.DeepCopy()
			}
		}
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := level[n]; ok {
				out[n] = q.DeepCopy()
			}
		}
		return out
	}
	var levelReq, levelLim corev1.ResourceList
	if pod.Spec.Resources != nil {
		levelReq, levelLim = pod.Spec.Resources.Requests, pod.Spec.Resources.Limits
	}
	req = sum(func(c corev1.Container) corev1.ResourceList { return c.Resources.Requests }, levelReq)
	lim = sum(func(c corev1.Container) corev1.ResourceList { return c.Resources.Limits }, levelLim)
	return req, lim
}

func addList(to, from corev1.ResourceList) {
	for n, q := range from {
		v := to[n].DeepCopy()
		v.Add(q)
		to[n] = v
	}
}

// containerItemRefuses is the first bound of item that res breaks, with the proxy's value and
// what changes it, or "". res is the proxy with the LimitRanges' defaults (the API server
// reinvokes its LimitRanger after the webhook, reinvocationPolicy IfNeeded, and that fills in a
// request or limit the proxy lacks from the LimitRange's defaults, measured against the real API
// server: a min ephemeral-storage of 1Mi gave the proxy a request of 1Mi); a LimitRange's own
// defaults fit its items (the API server validates them), another's may not.
func containerItemRefuses(item corev1.LimitRangeItem, res corev1.ResourceRequirements, defaulted map[defaultedKey]string) string {
	fix := func(r corev1.ResourceName, limit bool) string {
		return " (" + fixFor(r, limit, defaulted) + ")"
	}
	for _, r := range sortedNames(item.Min) {
		min := item.Min[r]
		if req, ok := res.Requests[r]; ok && req.Cmp(min) < 0 {
			return fmt.Sprintf("min %s is %s, and the proxy's %s request is %s%s", r, min.String(), r, req.String(), fix(r, false))
		}
		if lim, ok := res.Limits[r]; ok && lim.Cmp(min) < 0 {
			return fmt.Sprintf("min %s is %s, and the proxy's %s limit is %s%s", r, min.String(), r, lim.String(), fix(r, true))
		}
	}
	for _, r := range sortedNames(item.Max) {
		max := item.Max[r]
		if lim, ok := res.Limits[r]; ok && lim.Cmp(max) > 0 {
			return fmt.Sprintf("max %s is %s, and the proxy's %s limit is %s%s", r, max.String(), r, lim.String(), fix(r, true))
		}
		if req, ok := res.Requests[r]; ok && req.Cmp(max) > 0 {
			return fmt.Sprintf("max %s is %s, and the proxy's %s request is %s%s", r, max.String(), r, req.String(), fix(r, false))
		}
	}
	for _, r := range sortedNames(item.MaxLimitRequestRatio) {
		ratio := item.MaxLimitRequestRatio[r]
		req, hasReq := res.Requests[r]
		lim, hasLim := res.Limits[r]
		if !hasReq || !hasLim {
			continue
		}
		if req.IsZero() {
			// The LimitRanger refuses a ratio over a request of 0 ("but no request is
			// specified or request is 0"); an annotation may set one (only limits must be
			// above 0), and the pod was then injected and refused whole.
			return fmt.Sprintf("maxLimitRequestRatio %s is %s, and the proxy's %s request is 0, which no ratio admits%s", r, ratio.String(), r, fix(r, false))
		}
		// As the LimitRanger: limit/request in milli-units against the ratio's value.
		if got := float64(lim.MilliValue()) / float64(req.MilliValue()); got > float64(ratio.MilliValue())/1000 {
			return fmt.Sprintf("maxLimitRequestRatio %s is %s, and the proxy's %s limit %s over its request %s is %s%s", r, ratio.String(), r, lim.String(), req.String(),
				strconv.FormatFloat(got, 'g', 4, 64), fix(r, false))
		}
	}
	return ""
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for r := range l {
		names = append(names, r)
	}
	slices.Sort(names)
	return names
}
