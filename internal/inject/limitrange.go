package inject

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

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
// LimitRanger would refuse the proxy container c by, or "". The LimitRanger judges the pod after
// the webhooks (and, reinvoked, fills in only what the proxy does not set), so a proxy whose
// own values break a Container item's min, max or maxLimitRequestRatio made the pod
// refused whole, so that no pod of the workload was created (its
// ReplicaSet's events said only "minimum cpu usage per Container is 50m, but request is 10m").
// Skipped instead, the app runs without the proxy, and the skip names the LimitRange, the item,
// the bound and the proxy's value, and the annotation that changes it. The rules are the
// LimitRanger's (k8s.io/kubernetes plugin/pkg/admission/limitranger, minConstraint,
// maxConstraint, limitRequestRatioConstraint) for items of type Container, on the CPU and memory
// the proxy sets; items of type Pod (the sums of the pod's containers) are not judged here.
func limitRangeRefuses(ns string, ranges []corev1.LimitRange, c corev1.Container) string {
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(a, b corev1.LimitRange) int { return strings.Compare(a.Name, b.Name) })
	for _, lr := range sorted {
		for i, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			at := fmt.Sprintf("LimitRange %s/%s spec.limits[%d] (type Container)", ns, lr.Name, i)
			if why := containerItemRefuses(item, c.Resources); why != "" {
				return fmt.Sprintf("%s %s: the API server would refuse the pod", at, why)
			}
		}
	}
	return ""
}

// containerItemRefuses is the first bound of item that res breaks, with the proxy's value and
// the annotation that changes it, or "". Only values the proxy sets are judged: the API server
// reinvokes its LimitRanger after the webhook (reinvocationPolicy IfNeeded), and that fills in
// a request or limit the proxy lacks from the LimitRange's defaults, which fit it (measured
// against the real API server: a min ephemeral-storage of 1Mi gave the proxy a request of 1Mi).
func containerItemRefuses(item corev1.LimitRangeItem, res corev1.ResourceRequirements) string {
	fix := func(r corev1.ResourceName, limit bool) string {
		return " (set the annotation " + proxyResourceAnnotation(r, limit) + " on the pod's template or its Namespace)"
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
