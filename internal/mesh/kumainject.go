package mesh

import "fmt"

// Kuma's injector: which pods get kuma-sidecar. The one rule for the mesh layers (Set.InKuma,
// kumaEdge) and retrycap's injector (internal/inject, which must not put its proxy beside Kuma's
// on 15001), so that the two agree. As kumahq/kuma 348b6528 (and every release since 2.2.0):
//   - its webhooks (deployments/charts/kuma/templates/cp-webhooks-and-secrets.yaml) see a pod
//     outside kube-system and Kuma's own namespace when its Namespace's label
//     kuma.io/sidecar-injection is "enabled" or "true" (namespace-kuma-injector), or when the
//     Namespace has the label at all and the pod's label is "enabled" (pods-kuma-injector, an
//     objectSelector: the pod's labels only); in Kuma's namespace only a zone proxy
//     (mesh-zoneproxy-kuma-injector: label "enabled" with kuma.io/mesh and
//     k8s.kuma.io/zone-proxy-type);
//   - then pkg/plugins/runtime/k8s/webhooks/injector/precheck.go needToInject: the pod's label if
//     it has one, else the Namespace's, parsed by pkg/plugins/runtime/k8s/metadata/annotations.go
//     GetEnabled: "enabled", "true", "yes" inject; "disabled", "false", "no" do not; any other
//     value is an error, which the webhook returns (pod_mutator.go: kube_admission.Errored), and
//     the API server refuses the pod.
//
// Annotations are not read: kumahq/kuma ac1dbfbd73 ("remove annotation support for
// kuma.io/sidecar-injection", #6225, first in 2.2.0, March 2023) removed them from
// needToInject; 1.5.0 to 2.1.x read the pod's annotation after its label and the Namespace's
// after its label, with a deprecation warning (precheck.go still logs it,
// metadata.PodAnnotationDeprecations). Those releases are out of support; retrycap follows the
// current rule (docs/decisions.md, kuma19). The mesh is kuma.io/mesh, the pod's label, else the
// Namespace's (pkg/plugins/runtime/k8s/util/util.go MeshOfByLabel), labels only too.
const (
	KumaZoneProxyTypeLabel = "k8s.kuma.io/zone-proxy-type"
	// KumaSidecarInjected marks a pod Kuma's injector injected (metadata/annotations.go
	// KumaSidecarInjectedAnnotation, "true"; with the label kuma.io/mesh naming its mesh:
	// injector testdata inject.01.golden.yaml): a Pod dumped from a cluster is in Kuma by it.
	KumaSidecarInjected = "kuma.io/sidecar-injected"
	kubeSystem          = "kube-system"
)

// KumaWillInject says which label makes Kuma's injector add kuma-sidecar to a pod of namespace
// ns with labels, in a Namespace labelled nsLabels, or "" when it does not; an error when Kuma's
// injector refuses the pod (a value of the deciding label it cannot parse), naming the label and
// the value. A pod that already has kuma-sidecar is not injected again: the callers check that.
func KumaWillInject(ns string, labels, nsLabels map[string]string) (string, error) {
	nsV, nsOK := nsLabels[KumaSidecarInjection]
	podV, podOK := labels[KumaSidecarInjection]
	switch {
	case ns == kubeSystem:
		return "", nil
	case ns == KumaSystemNamespace:
		// Only the zone proxies' webhook sees a pod of Kuma's own namespace.
		if podV != "enabled" || !hasKey(labels, KumaMeshLabel) || !hasKey(labels, KumaZoneProxyTypeLabel) {
			return "", nil
		}
	case nsOK && (nsV == "enabled" || nsV == "true"): // namespace-kuma-injector
	case nsOK && podV == "enabled": // pods-kuma-injector
	default:
		return "", nil
	}
	if podOK {
		on, err := kumaEnabled(podV) // garbage: the pod's own label is what Kuma refuses
		if err != nil || !on {
			return "", err
		}
		return fmt.Sprintf("label %s is %q", KumaSidecarInjection, podV), nil
	}
	// Only the namespace webhook reaches here without a pod label: nsV is "enabled" or "true".
	return fmt.Sprintf("namespace %s is labelled %s=%s", ns, KumaSidecarInjection, nsV), nil
}

// kumaEnabled parses a kuma.io/sidecar-injection value as Kuma's GetEnabled does, its error
// message Kuma's own.
func kumaEnabled(v string) (bool, error) {
	switch v {
	case "enabled", "true", "yes":
		return true, nil
	case "disabled", "false", "no":
		return false, nil
	}
	return false, fmt.Errorf("label %s is %q: Kuma's injector refuses the pod (annotation \"%s\" has wrong value \"%s\"; it takes enabled, disabled, true, false, yes or no)",
		KumaSidecarInjection, v, KumaSidecarInjection, v)
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// KumaMeshOf is the Kuma mesh of a pod with labels in a Namespace labelled nsLabels (MeshOfByLabel).
func KumaMeshOf(labels, nsLabels map[string]string) string {
	if v := labels[KumaMeshLabel]; v != "" {
		return v
	}
	if v := nsLabels[KumaMeshLabel]; v != "" {
		return v
	}
	return KumaDefaultMesh
}
