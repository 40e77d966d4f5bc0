package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/retrycap/retrycap/internal/mesh"
)

// windowsOSLabels are the node labels a pod selects Windows nodes by.
var windowsOSLabels = []string{corev1.LabelOSStable, "beta.kubernetes.io/os"}

// windowsPod says which field puts the pod on Windows nodes and what follows, or "". With spec.os.name windows the
// API server refuses runAsUser, seccompProfile, capabilities and readOnlyRootFilesystem in any
// container (the pod, and every pod of its ReplicaSet, would never be created); without it the
// node still cannot run the proxy's Linux image, and the app never starts behind a native
// sidecar that never passes its startup probe.
func windowsPod(pod *corev1.Pod) string {
	if pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows {
		return fmt.Sprintf("spec.os.name is %q: the API server refuses the proxy's Linux security context (runAsUser, seccompProfile, capabilities) in a Windows pod, and its image is a Linux one", pod.Spec.OS.Name)
	}
	const noImage = ": the proxy's image is a Linux one, which a Windows node cannot run"
	for _, k := range windowsOSLabels {
		if v := pod.Spec.NodeSelector[k]; v == string(corev1.Windows) {
			return fmt.Sprintf("spec.nodeSelector %s is %q", k, v) + noImage
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	// The terms are ORed: the pod is Windows-only when each of them requires Windows.
	if len(terms) > 0 && !slices.ContainsFunc(terms, func(t corev1.NodeSelectorTerm) bool {
		return !slices.ContainsFunc(t.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return slices.Contains(windowsOSLabels, e.Key) && e.Operator == corev1.NodeSelectorOpIn &&
				len(e.Values) > 0 && !slices.ContainsFunc(e.Values, func(v string) bool { return v != string(corev1.Windows) })
		})
	}) {
		return "every term of spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution requires os In [windows]" + noImage
	}
	return ""
}

// meshSidecars are sidecars that listen on the proxy's ports without declaring them.
var meshSidecars = map[string]string{
	"istio-proxy": "Istio's sidecar, whose Envoy listens on 15001 and whose agent on 15020",
}

// istioWillInject says which label (or annotation), or which of Istio's injection webhooks,
// makes Istio's sidecar injector add istio-proxy to the pod, or "" (mesh.Set.IstioWillInject,
// the rule the mesh layers follow too: the selectors of Istio's MutatingWebhookConfigurations
// when the Set holds them, so that enableNamespacesByDefault is followed; else the chart's
// defaults).
// Admission webhooks run in the order of their configurations' names, so under a release name
// that sorts before Istio's (istio-sidecar-injector, istio-revision-tag-*) retrycap sees the pod
// before Istio does, and an injected pod would get both sidecars, on the same ports, and never
// start.
func istioWillInject(set *mesh.Set, pod *corev1.Pod, nsLabels map[string]string) string {
	return set.IstioWillInject(pod.Namespace, pod.Labels, pod.Annotations, nsLabels)
}

// proxyPorts are the ports the proxy binds in the pod's network namespace.
var proxyPorts = []int32{ListenPort, AdminPort}

// portTaken says what in the pod already uses one of proxyPorts, or "": Istio's sidecar (its
// probe rewrite also points the app's probes at 15020), a containerPort the app declares (one
// of the two could not bind it), a probe or lifecycle hook on one of them (it would reach the
// proxy, not the app), Kuma's or Consul's sidecar on 15001 (meshTakesListenPort), theirs to
// come (kumaWillInject, consulWillInject), Linkerd's
// classic sidecar answering the admin port only once the pod has started (linkerdCapturesAdmin),
// Istio's sidecar to come (istioWillInject), or Istio's ambient mode (nsLabels are the namespace's), whose ztunnel
// listens on *:15001 inside every captured pod. Named ports resolve to declared ones, so only
// numbers are checked here.
func portTaken(set *mesh.Set, pod *corev1.Pod, nsLabels map[string]string) string {
	for _, g := range containerGroups(pod) {
		for i, c := range g.cs {
			at := fmt.Sprintf("%s[%d] (container %s)", g.field, i, c.Name)
			if what, ok := meshSidecars[c.Name]; ok {
				return fmt.Sprintf("%s is %s", at, what)
			}
			for j, p := range c.Ports {
				if (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) && slices.Contains(proxyPorts, p.ContainerPort) {
					return fmt.Sprintf("%s ports[%d].containerPort is %d", at, j, p.ContainerPort)
				}
			}
			for _, h := range handlerPorts(c) {
				if slices.Contains(proxyPorts, h.port) {
					return fmt.Sprintf("%s %s is %d", at, h.field, h.port)
				}
			}
		}
	}
	if why := meshTakesListenPort(pod); why != "" {
		return why
	}
	if why := consulWillInject(pod); why != "" {
		return why
	}
	if why := kumaWillInject(pod, nsLabels); why != "" {
		return why + ": Kuma's injector will add its sidecar kuma-sidecar, whose Envoy listens on port 15001 for its transparent proxy's outbound traffic"
	}
	if why := linkerdCapturesAdmin(pod); why != "" {
		return why
	}
	if why := istioWillInject(set, pod, nsLabels); why != "" {
		return why + ": Istio's injector will add its sidecar istio-proxy, whose Envoy listens on 15001 and whose agent on 15020"
	}
	// Captured as mesh.Set.InAmbient decides (the sidecar case returned above).
	const ztunnel = ": Istio's ztunnel listens on *:15001, *:15006 and *:15008 inside every pod it captures"
	switch v, ok := pod.Labels[mesh.IstioDataplaneModeLabel]; {
	case v == "ambient":
		return fmt.Sprintf("label %s is %q", mesh.IstioDataplaneModeLabel, v) + ztunnel
	case ok && v == "none":
	case nsLabels[mesh.IstioDataplaneModeLabel] == "ambient":
		return fmt.Sprintf("namespace %s is labelled %s=ambient", pod.Namespace, mesh.IstioDataplaneModeLabel) + ztunnel
	}
	return ""
}

type handlerPort struct {
	field string
	port  int32
}

// handlerPorts are the numeric ports of c's probes and lifecycle hooks that reach the pod itself
// (an httpGet with a host of its own reaches another address).
func handlerPorts(c corev1.Container) []handlerPort {
	var out []handlerPort
	num := func(field string, p intstr.IntOrString) {
		if p.Type == intstr.Int {
			out = append(out, handlerPort{field, p.IntVal})
		}
	}
	probe := func(field string, p *corev1.Probe) {
		if p == nil {
			return
		}
		switch {
		case p.HTTPGet != nil && p.HTTPGet.Host == "":
			num(field+".httpGet.port", p.HTTPGet.Port)
		case p.TCPSocket != nil && p.TCPSocket.Host == "":
			num(field+".tcpSocket.port", p.TCPSocket.Port)
		case p.GRPC != nil:
			out = append(out, handlerPort{field + ".grpc.port", p.GRPC.Port})
		}
	}
	probe("startupProbe", c.StartupProbe)
	probe("readinessProbe", c.ReadinessProbe)
	probe("livenessProbe", c.LivenessProbe)
	if l := c.Lifecycle; l != nil {
		for _, h := range []struct {
			field string
			h     *corev1.LifecycleHandler
		}{{"lifecycle.postStart", l.PostStart}, {"lifecycle.preStop", l.PreStop}} {
			switch {
			case h.h == nil:
			case h.h.HTTPGet != nil && h.h.HTTPGet.Host == "":
				num(h.field+".httpGet.port", h.h.HTTPGet.Port)
			case h.h.TCPSocket != nil && h.h.TCPSocket.Host == "":
				num(h.field+".tcpSocket.port", h.h.TCPSocket.Port)
			}
		}
	}
	return out
}

// proxyEnvNames are the variables setProxyEnv writes.
var proxyEnvNames = []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"}

// envFromProxyNames are the variables an envFrom source may hold that decide where the
// container's calls go: those setProxyEnv writes, and ALL_PROXY, which it does not write but
// which curl, libcurl and Python's requests read for a scheme without a variable of its own.
var envFromProxyNames = append(slices.Clone(proxyEnvNames), "ALL_PROXY", "all_proxy")

// envFromProxyWarning is the warning for a container whose envFrom may set one of
// envFromProxyNames (a source with no prefix, or one a name starts with), or "": the injector
// cannot read the ConfigMap or Secret (it holds no client at admission, and a Secret's values
// are not its to read). The kubelet resolves envFrom first and lets env replace it
// (makeEnvironmentVariables: "Env will override EnvFrom variables"), so an HTTP_PROXY, HTTPS_PROXY
// or NO_PROXY there is replaced by retrycap's, and an ALL_PROXY there is kept but loses to
// retrycap's HTTP_PROXY and HTTPS_PROXY (TestInject18AllProxyClients: curl and Python requests
// send the call to retrycap's). Warned, not skipped: envFrom of an unprefixed ConfigMap is how
// most applications take their settings, and skipping each would leave them without the proxy.
func envFromProxyWarning(c *corev1.Container) string {
	var sources []string
	for _, e := range c.EnvFrom {
		if !slices.ContainsFunc(envFromProxyNames, func(n string) bool { return strings.HasPrefix(n, e.Prefix) }) {
			continue
		}
		switch {
		case e.ConfigMapRef != nil:
			sources = append(sources, "ConfigMap "+e.ConfigMapRef.Name)
		case e.SecretRef != nil:
			sources = append(sources, "Secret "+e.SecretRef.Name)
		}
	}
	if len(sources) == 0 {
		return ""
	}
	return fmt.Sprintf("container %s takes variables from %s (envFrom), which retrycap cannot read: env takes precedence over envFrom, so an HTTP_PROXY, HTTPS_PROXY or NO_PROXY there is replaced by retrycap's, and an ALL_PROXY there loses to retrycap's HTTP_PROXY and HTTPS_PROXY; an egress proxy set in the container's env instead is kept, and the container left as it is",
		c.Name, strings.Join(sources, ", "))
}

// guaranteed reports whether containers make a pod of QoS class Guaranteed (without pod-level
// resources): each has CPU and memory limits, and requests equal to them where it sets requests
// (an unset request defaults to the limit). A pod with no container is not.
func guaranteed(lists ...[]corev1.Container) bool {
	n := 0
	for _, cs := range lists {
		for _, c := range cs {
			n++
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				lim, ok := c.Resources.Limits[r]
				if !ok || lim.IsZero() {
					return false
				}
				if req, ok := c.Resources.Requests[r]; ok && req.Cmp(lim) != 0 {
					return false
				}
			}
		}
	}
	return n > 0
}

// containerGroup is one of a pod's container lists with the field it is read from.
type containerGroup struct {
	field string
	cs    []corev1.Container
}

// containerGroups are the pod's init containers, then its containers, as messages name them.
func containerGroups(pod *corev1.Pod) []containerGroup {
	return []containerGroup{{"spec.initContainers", pod.Spec.InitContainers}, {"spec.containers", pod.Spec.Containers}}
}
