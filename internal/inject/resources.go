package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/retrycap/retrycap/internal/workload"
)

// The sidecar's resource rules are workload's (workload.ParseProxyResources), so that the gate
// and analyze judge a template's proxy resource annotations as the injector applies them.
type (
	ProxyResources = workload.ProxyResources
	ResourceError  = workload.ResourceError
)

// ParseProxyResources is workload.ParseProxyResources.
func ParseProxyResources(ann map[string]string) (ProxyResources, error) {
	return workload.ParseProxyResources(ann)
}

// proxyResources is workload.ParseProxyResourcesIn for the injector (the pod's annotations
// ann over those of its Namespace ns, nsAnn): who names the pod's workload in the error, before
// the annotation, its value and, for a Namespace's, the Namespace.
func proxyResources(who, ns string, nsAnn, ann map[string]string) (res corev1.ResourceRequirements, threads string, warnings []string, err error) {
	r, err := workload.ParseProxyResourcesIn(ns, nsAnn, ann)
	if err != nil {
		return res, "", nil, fmt.Errorf("%s: %w", who, err)
	}
	return corev1.ResourceRequirements{Requests: r.Requests, Limits: r.Limits}, r.Threads, r.Warnings, nil
}
