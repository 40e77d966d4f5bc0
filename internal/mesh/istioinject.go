package mesh

import (
	"fmt"
	"slices"
)

// IstioIgnoredNamespaces are never injected by Istio (istio/istio pkg/kube/inject/initializer.go
// IgnoredNamespaces).
var IstioIgnoredNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}

// IstioWillInject says which label (or annotation) makes Istio's sidecar injector add
// istio-proxy to a pod of namespace ns with labels and annotations, in a namespace labelled
// nsLabels, or "". It is the one rule for both the mesh layers (Set.InIstio) and the injector
// (internal/inject, which must not put its proxy beside Istio's), so that the two agree. These
// are Istio's rules exactly: its injection webhooks' selectors (istio/istio
// manifests/charts/istio-control/istio-discovery/templates/mutatingwebhook.yaml and
// revision-tags-mwc.yaml; objectSelector reads pod labels only), then its injector's own check
// (pkg/kube/inject/inject.go injectRequired, under the default policy "enabled" and no
// never/always-inject selectors):
//   - namespace label istio-injection: "enabled" injects a pod whose label
//     sidecar.istio.io/inject is not "false"; any other value injects nothing, whatever the pod
//     says (every other webhook requires istio-injection DoesNotExist);
//   - else namespace label istio.io/rev (any value but "": retrycap does not know which
//     revisions and tags are installed, but none is named "") injects a pod whose label
//     sidecar.istio.io/inject is not "false"; "" injects nothing;
//   - else pod label istio.io/rev (any value but "", which injects nothing),
//     sidecar.istio.io/inject not "false", or pod
//     label sidecar.istio.io/inject: "true" (an annotation "true" alone selects no webhook);
//   - then the injector skips the pod when sidecar.istio.io/inject is "false": the label, or,
//     without it, the annotation; and in Istio's ignored namespaces.
//
// Istio's enableNamespacesByDefault (injecting unlabelled namespaces) shows only in its webhook
// configurations: Set.IstioWillInject follows them when the Set holds them (istiowebhooks.go).
func IstioWillInject(ns string, labels, annotations, nsLabels map[string]string) string {
	if slices.Contains(IstioIgnoredNamespaces, ns) {
		return ""
	}
	podInject, podInjectSet := labels[IstioInjectAnnotation]
	var why string
	nsInjection, nsInjectionSet := nsLabels[IstioInjectionLabel]
	nsRev, nsRevSet := nsLabels[IstioRevLabel]
	podRev, podRevSet := labels[IstioRevLabel]
	switch {
	case nsInjectionSet:
		if nsInjection != "enabled" || podInject == "false" {
			return ""
		}
		why = fmt.Sprintf("namespace %s is labelled %s=enabled", ns, IstioInjectionLabel)
	case nsRevSet:
		// An empty value names no revision (each revision's webhook selects its name, the
		// default's "default"), and the other webhooks require the label absent.
		if podInject == "false" || nsRev == "" {
			return ""
		}
		why = fmt.Sprintf("namespace %s is labelled %s=%s", ns, IstioRevLabel, nsRev)
	case podRevSet && (podInject == "false" || podRev == ""):
		return "" // as the Namespace's: an empty value is no revision, and excludes the object webhook
	case podRevSet:
		why = fmt.Sprintf("label %s is %q", IstioRevLabel, podRev)
	case podInject == "true" && !podRevSet:
		why = fmt.Sprintf("label %s is \"true\"", IstioInjectAnnotation)
	default:
		return ""
	}
	// injectRequired: the label if present, else the annotation; "false" opts out.
	if !podInjectSet {
		if v := annotations[IstioInjectAnnotation]; v == "false" {
			return ""
		}
	}
	return why
}
