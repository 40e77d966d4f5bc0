package inject

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/mesh"
)

// Kuma's and Consul's names: kumahq/kuma pkg/plugins/runtime/k8s/util/names.go and
// pkg/plugins/runtime/k8s/metadata/annotations.go; hashicorp/consul-k8s
// control-plane/connect-inject/webhook/mesh_webhook.go and constants/annotations_and_labels.go.
const (
	kumaSidecarName = "kuma-sidecar"
	// kumaTPConfig is the transparent proxy's configuration Kuma's injector writes on the pod
	// (YAML); kumaTPOutboundPort is what older Kumas wrote instead.
	kumaTPConfig       = "traffic.kuma.io/transparent-proxy-config"
	kumaTPOutboundPort = "kuma.io/transparent-proxying-outbound-port"
	consulSidecarName  = "consul-dataplane"
	consulTProxy       = "consul.hashicorp.com/transparent-proxy"
	// meshOutboundPort is Kuma's and Consul's default outbound port (Consul's sdk/iptables
	// DefaultTProxyOutboundPort), where their Envoy listens for what iptables send it.
	meshOutboundPort = 15001
)

// meshTakesListenPort says which container of a Kuma or Consul sidecar binds the proxy's
// ListenPort, or "". Their transparent proxies run Envoy's outbound listener on 15001 (Kuma on
// every address, Consul on 127.0.0.1), as Istio's does, without declaring it, so the proxy could
// not bind 127.0.0.1:15001, its startup probe would never pass and the pod would never start.
// Kuma's injector writes the port it chose on the pod; Consul's is 15001 unless the pod turns
// the transparent proxy off (a cluster that turns it off by default cannot be told from the
// pod: such a pod is skipped, and the message says how to have it injected).
func meshTakesListenPort(pod *corev1.Pod) string {
	for _, g := range containerGroups(pod) {
		for i, c := range g.cs {
			at := fmt.Sprintf("%s[%d] (container %s)", g.field, i, c.Name)
			switch c.Name {
			case kumaSidecarName:
				if port, from := kumaOutboundPort(pod.Annotations); port == ListenPort {
					return fmt.Sprintf("%s is Kuma's sidecar, whose Envoy listens on port %d (%s) for its transparent proxy's outbound traffic", at, port, from)
				}
			case consulSidecarName:
				if v, ok := pod.Annotations[consulTProxy]; v != "false" {
					said := "not set, on by Consul's default"
					if ok {
						said = strconv.Quote(v)
					}
					return fmt.Sprintf("%s is Consul's sidecar, whose Envoy listens on 127.0.0.1:%d for its transparent proxy's outbound traffic (annotation %s is %s; \"false\" turns it off)", at, meshOutboundPort, consulTProxy, said)
				}
			}
		}
	}
	return ""
}

// kumaOutboundPort is the port of Kuma's outbound listener on the pod (0 when its transparent
// proxy redirects no outbound traffic) and where it was read. A value Kuma's injector would not
// have written is read as Kuma's default: a skip said is better than a pod that never starts.
func kumaOutboundPort(ann map[string]string) (int32, string) {
	if v, ok := ann[kumaTPConfig]; ok {
		var cfg struct {
			Redirect struct {
				Outbound struct {
					Enabled *bool  `json:"enabled"`
					Port    *int32 `json:"port"`
				} `json:"outbound"`
			} `json:"redirect"`
		}
		from := "annotation " + kumaTPConfig + " redirect.outbound.port"
		switch out := &cfg.Redirect.Outbound; {
		case yaml.Unmarshal([]byte(v), &cfg) != nil:
			return meshOutboundPort, "Kuma's default: annotation " + kumaTPConfig + " is not YAML"
		case out.Enabled != nil && !*out.Enabled:
			return 0, "annotation " + kumaTPConfig + " redirect.outbound.enabled"
		case out.Port != nil:
			return *out.Port, from
		}
		return meshOutboundPort, "Kuma's default: annotation " + kumaTPConfig + " sets no redirect.outbound.port"
	}
	if v, ok := ann[kumaTPOutboundPort]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return int32(n), "annotation " + kumaTPOutboundPort
		}
		return meshOutboundPort, fmt.Sprintf("Kuma's default: annotation %s is %q, not a port", kumaTPOutboundPort, v)
	}
	return meshOutboundPort, "Kuma's default"
}

// kumaWillInject says which label makes Kuma's injector add kuma-sidecar to the pod after
// retrycap's (admission webhooks run in the order of their configurations' names, and Kuma's,
// kuma-admission-mutating-webhook-configuration, sorts after a release name such as "api"), or
// "": mesh.KumaWillInject, the rule the mesh layers count Kuma by. A pod that already has
// kuma-sidecar is not injected again (Kuma's needToInject: "pod already has Kuma sidecar"): its
// port is meshTakesListenPort's, and one whose outbound listener is elsewhere or off leaves 15001
// free. A pod Kuma's injector refuses (a label value it cannot parse) never runs beside
// kuma-sidecar: nothing to conflict with.
func kumaWillInject(pod *corev1.Pod, nsLabels map[string]string) string {
	hasSidecar := func(c corev1.Container) bool { return c.Name == kumaSidecarName }
	if slices.ContainsFunc(pod.Spec.Containers, hasSidecar) || slices.ContainsFunc(pod.Spec.InitContainers, hasSidecar) {
		return ""
	}
	why, err := mesh.KumaWillInject(pod.Namespace, pod.Labels, nsLabels)
	if err != nil {
		return ""
	}
	return why
}

// consulInject is the pod annotation that asks Consul's injector for its sidecar
// (hashicorp/consul-k8s control-plane/connect-inject/constants AnnotationInject).
const consulInject = "consul.hashicorp.com/connect-inject"

// consulWillInject says which annotation makes Consul's injector add consul-dataplane to the pod
// after retrycap's (its configuration, consul-connect-injector, sorts after a release name such
// as "api"), with its transparent proxy on, or "". A Consul that injects every pod by default
// (connectInject.default) cannot be seen from the pod.
func consulWillInject(pod *corev1.Pod) string {
	if v := pod.Annotations[consulInject]; v == "true" && pod.Annotations[consulTProxy] != "false" {
		return fmt.Sprintf("annotation %s is %q: Consul's injector will add its sidecar %s, whose Envoy listens on 127.0.0.1:%d for its transparent proxy's outbound traffic (annotation %s \"false\" turns it off)",
			consulInject, v, consulSidecarName, meshOutboundPort, consulTProxy)
	}
	return ""
}
