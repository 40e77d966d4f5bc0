package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/retrycap/retrycap/internal/mesh"
)

// Linkerd's names (linkerd/linkerd2 pkg/k8s/labels.go, charts/partials/templates/_proxy-init.tpl).
const (
	linkerdProxyName = "linkerd-proxy"
	linkerdInitName  = "linkerd-init"
	// linkerdSkipInbound is the annotation whose ports Linkerd's iptables (linkerd-init's
	// --inbound-ports-to-ignore, or its CNI plugin, which reads the pod's annotation) leave alone.
	linkerdSkipInbound = "config.linkerd.io/skip-inbound-ports"
	linkerdInitIgnore  = "--inbound-ports-to-ignore"
)

// linkerdCapturesAdmin says why Linkerd's classic sidecar keeps the proxy's admin port from the
// kubelet until the pod's containers start, or "". In that mode linkerd-proxy is a regular
// container, started only after every init container, while linkerd-init (or Linkerd's CNI
// plugin, before any container) has already redirected every inbound TCP port to it but those
// it is told to skip. The proxy is a native sidecar whose startup probe on AdminPort gates
// the rest of the pod: that probe would reach a Linkerd proxy that is not running, fail, and
// the pod would never start. Linkerd's native sidecar (an init container, started before
// retrycap's) answers it, and so does a pod that skips AdminPort: both are injected.
func linkerdCapturesAdmin(pod *corev1.Pod) string {
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == linkerdProxyName })
	if i < 0 {
		return ""
	}
	skipped := pod.Annotations[linkerdSkipInbound]
	by := "Linkerd's CNI plugin redirects"
	if j := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == linkerdInitName }); j >= 0 {
		by = fmt.Sprintf("spec.initContainers[%d] (container %s) redirects", j, linkerdInitName)
		skipped = strings.Join([]string{skipped, flagValue(pod.Spec.InitContainers[j].Args, linkerdInitIgnore)}, ",")
	}
	if mesh.InPortList(skipped, AdminPort) {
		return ""
	}
	but := ""
	if s := strings.Trim(skipped, ","); s != "" {
		but = " but " + s
	}
	return fmt.Sprintf("spec.containers[%d] (container %s) is Linkerd's proxy as a regular container, started only after every init container, and %s every inbound TCP port%s to it: the kubelet's startup probe of the proxy on port %d would never be answered and the pod would never start (annotate the pod (its template) %s: \"%d\", or use Linkerd's native sidecar)",
		i, linkerdProxyName, by, but, AdminPort, linkerdSkipInbound, AdminPort)
}

// flagValue is the value of flag in args, as "--flag value" or "--flag=value"; "" if absent.
func flagValue(args []string, flag string) string {
	for k, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && k+1 < len(args) {
			return args[k+1]
		}
	}
	return ""
}
