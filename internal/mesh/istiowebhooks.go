package mesh

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Istio's injection webhooks, read from its MutatingWebhookConfigurations
// (istio-sidecar-injector[-<rev>], istio-revision-tag-<tag>; istio/istio
// manifests/charts/istio-control/istio-discovery/templates/mutatingwebhook.yaml and
// revision-tags-mwc.yaml). Install values such as sidecarInjectorWebhook.enableNamespacesByDefault
// only show in them (the auto.sidecar-injector.istio.io webhook), so when the input or the
// cluster holds them, injection is decided by their selectors as the API server matches them,
// not by the chart's default selectors that IstioWillInject encodes.

// GroupAdmission is the API group of MutatingWebhookConfigurations.
const GroupAdmission = "admissionregistration.k8s.io"

// istioWebhookSuffix ends the name of every webhook of Istio's injector ("rev.namespace.",
// "rev.object.", "namespace.", "object.", "auto." + it): the chart's "core" template.
const istioWebhookSuffix = "sidecar-injector.istio.io"

// namespaceNameLabel is the label the API server sets on every Namespace to its name (since
// Kubernetes 1.21, immutable): the auto webhook's namespaceSelector reads it, and a Namespace of a
// manifest set need not carry it.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// istioInjector is one MutatingWebhookConfiguration's injection webhooks.
type istioInjector struct {
	name string
	// serves is the revision (or tag) whose labels its webhooks select: the configuration's
	// label istio.io/tag, else istio.io/rev, else "default" (the chart sets istio.io/rev to the
	// revision or "default", and a tag's configuration istio.io/tag to the tag).
	serves   string
	webhooks []istioWebhook
}

// IstioTagLabel names the tag a revision tag's MutatingWebhookConfiguration serves.
const IstioTagLabel = "istio.io/tag"

type istioWebhook struct {
	name           string
	nsSel, objSel  labels.Selector
	nsText, objTxt string
}

type mutatingWebhookConfiguration struct {
	header
	Webhooks []struct {
		Name              string                `json:"name"`
		NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
		ObjectSelector    *metav1.LabelSelector `json:"objectSelector"`
		Rules             []webhookRule         `json:"rules"`
	} `json:"webhooks"`
}

type webhookRule struct {
	Operations  []string `json:"operations"`
	APIGroups   []string `json:"apiGroups"`
	APIVersions []string `json:"apiVersions"`
	Resources   []string `json:"resources"`
}

// createsPods: the rule calls the webhook for a pod's CREATE.
func (r webhookRule) createsPods() bool {
	return anyOf(r.Operations, "CREATE") && anyOf(r.APIGroups, "") && anyOf(r.APIVersions, "v1") && anyOf(r.Resources, "pods")
}

// addIstioInjector reads a MutatingWebhookConfiguration; one with no webhook of Istio's injector
// (retrycap's own, any other project's) is not kept and reports false.
func (s *Set) addIstioInjector(h header, decode func(any) error) (bool, error) {
	var c mutatingWebhookConfiguration
	if err := decode(&c); err != nil {
		return false, err
	}
	in := &istioInjector{name: h.Metadata.Name, serves: "default"}
	if v := h.Metadata.Labels[IstioRevLabel]; v != "" {
		in.serves = v
	}
	if v := h.Metadata.Labels[IstioTagLabel]; v != "" {
		in.serves = v
	}
	for i, w := range c.Webhooks {
		if !strings.HasSuffix(w.Name, istioWebhookSuffix) {
			continue
		}
		// A webhook that is not called for a pod's CREATE injects nothing (the chart's rule is
		// operations [CREATE], apiGroups [""], apiVersions [v1], resources [pods]).
		if !slices.ContainsFunc(w.Rules, webhookRule.createsPods) {
			continue
		}
		nsSel, err := webhookSelector(w.NamespaceSelector)
		if err != nil {
			return false, fmt.Errorf("MutatingWebhookConfiguration %s webhooks[%d].namespaceSelector (webhook %s): %w", h.Metadata.Name, i, w.Name, err)
		}
		objSel, err := webhookSelector(w.ObjectSelector)
		if err != nil {
			return false, fmt.Errorf("MutatingWebhookConfiguration %s webhooks[%d].objectSelector (webhook %s): %w", h.Metadata.Name, i, w.Name, err)
		}
		in.webhooks = append(in.webhooks, istioWebhook{name: w.Name, nsSel: nsSel, objSel: objSel, nsText: selectorText(nsSel), objTxt: selectorText(objSel)})
	}
	_, had := s.istioInjectors[h.Metadata.Name]
	if len(in.webhooks) == 0 {
		// Replaced by a version without Istio's webhooks: no longer one of its injectors.
		delete(s.istioInjectors, h.Metadata.Name)
		return had, nil
	}
	s.istioInjectors[h.Metadata.Name] = in
	return true, nil
}

// anyOf: a webhook rule's list holds v or "*".
func anyOf(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, "*")
}

// webhookSelector is a webhook's selector as the API server applies it: nil (unset) matches
// everything, as does an empty one.
func webhookSelector(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

func selectorText(sel labels.Selector) string {
	if sel.Empty() {
		return "everything"
	}
	return sel.String()
}

// IstioInjectors reports whether the Set holds Istio's injection webhooks (then
// Set.IstioWillInject follows their selectors).
func (s *Set) IstioInjectors() bool { return s != nil && len(s.istioInjectors) > 0 }

// IstioWillInject is the package's IstioWillInject, with the selectors of Istio's injection
// webhooks when the Set holds any: a webhook selects the pod when its namespaceSelector matches
// the namespace's labels (with kubernetes.io/metadata.name, which the API server sets) and its
// objectSelector the pod's labels. Then, as in Istio's injectRequired, the pod's
// sidecar.istio.io/inject "false" (the label, else the annotation) and Istio's ignored
// namespaces still keep it out. A manifest set may hold one revision's configuration and not
// another's (istiod-canary installed apart): a pod no webhook selects, whose labels name a
// revision (or, by istio-injection=enabled or sidecar.istio.io/inject "true", the default one)
// that no configuration of the Set serves, is judged by the default rule, said so (the
// configuration is assumed to be installed: counting a sidecar that is not there is a false
// red, missing one a false green). nsLabels are the namespace's labels; nil Set: the default
// rule.
func (s *Set) IstioWillInject(ns string, podLabels, annotations, nsLabels map[string]string) string {
	if !s.IstioInjectors() {
		return IstioWillInject(ns, podLabels, annotations, nsLabels)
	}
	if slices.Contains(IstioIgnoredNamespaces, ns) {
		return ""
	}
	optOut, ok := podLabels[IstioInjectAnnotation]
	if !ok {
		optOut = annotations[IstioInjectAnnotation]
	}
	if optOut == "false" {
		return "" // injectRequired
	}
	nsSet := labels.Set{namespaceNameLabel: ns}
	for k, v := range nsLabels {
		nsSet[k] = v
	}
	podSet := labels.Set(podLabels)
	names := make([]string, 0, len(s.istioInjectors))
	for n := range s.istioInjectors {
		names = append(names, n)
	}
	sort.Strings(names)
	served := map[string]bool{}
	for _, n := range names {
		in := s.istioInjectors[n]
		served[in.serves] = true
		for _, w := range in.webhooks {
			if w.nsSel.Matches(nsSet) && w.objSel.Matches(podSet) {
				return fmt.Sprintf("webhook %s of MutatingWebhookConfiguration %s selects it (namespaceSelector %s; objectSelector %s)", w.name, n, w.nsText, w.objTxt)
			}
		}
	}
	why := IstioWillInject(ns, podLabels, annotations, nsLabels)
	if rev := istioNamedRevision(podLabels, nsLabels); why != "" && !served[rev] {
		return fmt.Sprintf("%s (no MutatingWebhookConfiguration of Istio's in the input serves revision %s: assumed installed)", why, rev)
	}
	return ""
}

// istioNamedRevision is the revision (or tag) a pod's and its namespace's labels ask Istio's
// injector for, in the precedence of its webhooks (IstioWillInject): istio-injection (the
// default revision), else the namespace's istio.io/rev, else the pod's, else the pod's
// sidecar.istio.io/inject (the default revision); "" for none.
func istioNamedRevision(podLabels, nsLabels map[string]string) string {
	if _, ok := nsLabels[IstioInjectionLabel]; ok {
		return "default"
	}
	if v, ok := nsLabels[IstioRevLabel]; ok {
		return v
	}
	if v, ok := podLabels[IstioRevLabel]; ok {
		return v
	}
	if _, ok := podLabels[IstioInjectAnnotation]; ok {
		return "default"
	}
	return ""
}

// IsIstioInjector reports whether a MutatingWebhookConfiguration, as JSON, holds a webhook of
// Istio's sidecar injector (one the Set keeps, when its rules take a pod's CREATE), for the CLI's
// count of the mesh objects read.
func IsIstioInjector(data []byte) bool {
	var c struct {
		Webhooks []struct {
			Name string `json:"name"`
		} `json:"webhooks"`
	}
	if json.Unmarshal(data, &c) != nil {
		return false
	}
	return slices.ContainsFunc(c.Webhooks, func(w struct {
		Name string `json:"name"`
	}) bool {
		return strings.HasSuffix(w.Name, istioWebhookSuffix)
	})
}
