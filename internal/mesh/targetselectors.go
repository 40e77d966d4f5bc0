package mesh

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Envoy Gateway's targetSelectors (envoyproxy/gateway d32f28294245 api/v1alpha1/policy_helpers.go
// TargetSelector; internal/gatewayapi/helpers.go resolvePolicyTargetsFromSelectors): a
// BackendTrafficPolicy may name its targets by labels instead of by name. A selector takes the
// objects of its kind (group gateway.networking.k8s.io unless set) whose labels match
// matchLabels and matchExpressions (none: every one), in the policy's namespace, or, with
// namespaces.from All, any namespace, with Selector, the namespaces whose labels match; a target
// in another namespace also needs a ReferenceGrant, which retrycap does not read: counted (an
// upper bound). Before, a policy that named its targets only this way was read as targeting
// nothing, and its retries were not counted (a false green).

type targetSelector struct {
	Group            *string                           `json:"group"`
	Kind             string                            `json:"kind"`
	MatchLabels      map[string]string                 `json:"matchLabels"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions"`
	Namespaces       *struct {
		From     string                `json:"from"`
		Selector *metav1.LabelSelector `json:"selector"`
	} `json:"namespaces"`

	labels, namespaces labels.Selector // parsed when the policy is added
}

// parseTargetSelectors checks and parses p's spec.targetSelectors; a selector the API server's
// label selector syntax refuses is an error naming the policy, the field and the value (Envoy
// Gateway would select nothing with it, in silence).
func parseTargetSelectors(p *backendTrafficPolicy) error {
	for i := range p.Spec.TargetSelectors {
		t := &p.Spec.TargetSelectors[i]
		sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: t.MatchLabels, MatchExpressions: t.MatchExpressions})
		if err != nil {
			return fmt.Errorf("%s spec.targetSelectors[%d]: %w", p.id(), i, err)
		}
		t.labels = sel
		if t.Namespaces != nil && t.Namespaces.From == "Selector" {
			if t.Namespaces.Selector == nil {
				return fmt.Errorf("%s spec.targetSelectors[%d].namespaces: from Selector without a selector", p.id(), i)
			}
			if t.namespaces, err = metav1.LabelSelectorAsSelector(t.Namespaces.Selector); err != nil {
				return fmt.Errorf("%s spec.targetSelectors[%d].namespaces.selector: %w", p.id(), i, err)
			}
		}
	}
	return nil
}

// selectedTargets are the index keys ("HTTPRoute/ns/name", "Gateway/ns/name") of the routes and
// Gateways of the Set that p's targetSelectors select.
func (s *Set) selectedTargets(p *backendTrafficPolicy) []string {
	var keys []string
	for _, t := range p.Spec.TargetSelectors {
		if t.labels == nil || t.Group != nil && *t.Group != "" && *t.Group != GroupGateway {
			continue
		}
		match := func(h header) {
			if h.Kind == t.Kind && h.group() == GroupGateway && s.targetNamespace(t, p.Metadata.Namespace, h.Metadata.Namespace) &&
				t.labels.Matches(labels.Set(h.Metadata.Labels)) {
				keys = append(keys, h.Kind+"/"+h.Metadata.Namespace+"/"+h.Metadata.Name)
			}
		}
		for _, k := range sortedKeys(s.routes) {
			match(s.routes[k].header)
		}
		for _, k := range sortedKeys(s.gateways) {
			match(s.gateways[k].header)
		}
	}
	return keys
}

// targetNamespace: a target in namespace ns may be selected by t of a policy in policyNS
// (helpers.go targetSelectorNamespacesMatch).
func (s *Set) targetNamespace(t targetSelector, policyNS, ns string) bool {
	if t.Namespaces == nil || t.Namespaces.From == "" || t.Namespaces.From == "Same" {
		return ns == policyNS
	}
	switch t.Namespaces.From {
	case "All":
		return true
	case "Selector":
		set := labels.Set{namespaceNameLabel: ns}
		for k, v := range s.namespaces[ns].Labels {
			set[k] = v
		}
		return t.namespaces != nil && t.namespaces.Matches(set)
	}
	return false
}
