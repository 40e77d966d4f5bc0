package analyze

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// ClusterRetryPolicies (DESIGN.md, "Chains across namespaces"): a cluster policy selects
// namespaces by their Namespace objects' labels, so the input must say what those labels are:
// the Namespace objects read, or --namespace-labels. A namespace whose workloads are in the input
// but whose labels are not is not guessed: every cluster policy whose namespaceSelector needs
// them says so, and analyze exits 2 (something was not checked).

// clusterPolicy reads a ClusterRetryPolicy into m.ClusterPolicies ("ClusterRetryPolicy/name" in
// m.Sources).
func (r Reader) clusterPolicy(m *Manifests, src Source, js []byte, tm *typeMeta) []error {
	if err := checkPolicyFields(js); err != nil {
		return []error{&InputError{src, fmt.Errorf("%s: %w", r.ident(tm), err)}}
	}
	p := &v1alpha1.ClusterRetryPolicy{}
	if err := r.decode(src, js, tm, p); err != nil {
		return []error{err}
	}
	if err := defaultPolicy(p.Name, &p.Spec.RetryPolicySpec, true); err != nil {
		return []error{&InputError{src, fmt.Errorf("ClusterRetryPolicy %s: %w", p.Name, err)}}
	}
	if p.Spec.NamespaceSelector == nil {
		return []error{&InputError{src, fmt.Errorf("ClusterRetryPolicy %s: spec.namespaceSelector is required ({} selects every namespace)", p.Name)}}
	}
	if _, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector); err != nil {
		return []error{&InputError{src, fmt.Errorf("ClusterRetryPolicy %s: spec.namespaceSelector %s: %w", p.Name, renderSelector(p.Spec.NamespaceSelector), err)}}
	}
	m.ClusterPolicies = laterWins(m, m.ClusterPolicies, "ClusterRetryPolicy/"+p.Name, "ClusterRetryPolicy "+p.Name, src,
		func(q *v1alpha1.ClusterRetryPolicy) bool { return q.Name == p.Name })
	m.ClusterPolicies = append(m.ClusterPolicies, p)
	m.Summary.ClusterPolicies = len(m.ClusterPolicies)
	return nil
}

// namespaceObject reads a Namespace: its labels (what a cluster policy's namespaceSelector
// selects by), and its mesh labels and annotations into the mesh Set; it is counted as ignored,
// as it is not graph input.
func (r Reader) namespaceObject(m *Manifests, src Source, js []byte, tm *typeMeta) []error {
	if err := r.decode(src, js, tm, &corev1.Namespace{}); err != nil {
		return []error{err}
	}
	if err := m.readNamespace(src, js); err != nil {
		return []error{err}
	}
	m.Summary.Namespaces++ // read: labels for meshes and cluster policies, not "ignored"
	return r.addMesh(m, src, js, tm)
}

// clusterEntrypointReason says why a cluster policy's entrypoint is not "service.namespace"
// (also with .svc[.cluster.local]); "" when it is.
func clusterEntrypointReason(s string) string {
	svc, ns, ok := annotations.SplitService(s)
	if !ok {
		return `a ClusterRetryPolicy's entrypoint is "service.namespace"`
	}
	if reason := annotations.ValidateLabel(svc); reason != "" {
		return "service " + reason
	}
	if reason := annotations.ValidateLabel(ns); reason != "" {
		return "namespace " + reason
	}
	return ""
}

// readNamespace records a Namespace object's labels (unless --namespace-labels gave them).
func (m *Manifests) readNamespace(src Source, js []byte) error {
	var n corev1.Namespace
	if err := json.Unmarshal(js, &n); err != nil {
		return &InputError{src, fmt.Errorf("namespace %s: %w", n.Name, err)}
	}
	if m.NamespaceLabels == nil {
		m.NamespaceLabels = map[string]map[string]string{}
	}
	if _, given := m.flagLabels[n.Name]; given {
		return nil
	}
	l := n.Labels
	if l == nil {
		l = map[string]string{}
	}
	// The API server labels every namespace with its name.
	if _, ok := l[corev1.LabelMetadataName]; !ok {
		l[corev1.LabelMetadataName] = n.Name
	}
	m.NamespaceLabels[n.Name] = l
	return nil
}

// SetNamespaceLabels gives namespace ns's labels (--namespace-labels NS=k=v,k2=v2): for a
// namespace whose Namespace object is not in the input; it wins over one that is. value is
// "k=v,k2=v2" (empty: no labels but kubernetes.io/metadata.name).
func (m *Manifests) SetNamespaceLabels(ns, value string) error {
	if reason := annotations.ValidateLabel(ns); reason != "" {
		return fmt.Errorf("namespace %q: %s", ns, reason)
	}
	l := map[string]string{corev1.LabelMetadataName: ns}
	if strings.TrimSpace(value) != "" {
		for _, kv := range strings.Split(value, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return fmt.Errorf("namespace %s: label %q: want KEY=VALUE", ns, kv)
			}
			l[k] = v
		}
	}
	if m.NamespaceLabels == nil {
		m.NamespaceLabels = map[string]map[string]string{}
	}
	if m.flagLabels == nil {
		m.flagLabels = map[string]bool{}
	}
	m.NamespaceLabels[ns], m.flagLabels[ns] = l, true
	return nil
}

// analyzeClusterPolicies reports on every cluster policy read, sorted by name, and says which
// namespaces of the input it could not evaluate.
func (m *Manifests) analyzeClusterPolicies() (prs []PolicyReport, unchecked []string) {
	ps := slices.Clone(m.ClusterPolicies)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	// The namespaces the input has workloads in, and those of them without known labels.
	var unknown []string
	seen := map[string]bool{}
	for _, w := range m.Workloads {
		if seen[w.Namespace] {
			continue
		}
		seen[w.Namespace] = true
		if _, ok := m.NamespaceLabels[w.Namespace]; !ok {
			unknown = append(unknown, w.Namespace)
		}
	}
	sort.Strings(unknown)
	for _, p := range ps {
		sel := renderSelector(p.Spec.NamespaceSelector)
		if len(unknown) > 0 && !selectsAll(p.Spec.NamespaceSelector) {
			unchecked = append(unchecked, fmt.Sprintf("ClusterRetryPolicy %s: the labels of namespace(s) %s are not in the input (no Namespace object; give them with --namespace-labels NS=KEY=VALUE,...): spec.namespaceSelector %s cannot be evaluated for them, their workloads were not checked",
				p.Name, strings.Join(unknown, ", "), sel))
		}
		labels := m.NamespaceLabels
		if selectsAll(p.Spec.NamespaceSelector) && len(unknown) > 0 {
			// {} selects every namespace whatever its labels.
			labels = make(map[string]map[string]string, len(m.NamespaceLabels)+len(unknown))
			for k, v := range m.NamespaceLabels {
				labels[k] = v
			}
			for _, ns := range unknown {
				labels[ns] = nil
			}
		}
		s, err := workload.NewClusterScope(p, labels)
		if err != nil {
			// The reader refused what NewClusterScope refuses.
			unchecked = append(unchecked, err.Error())
			continue
		}
		r, a := workload.Analyze(workload.ForClusterRetryPolicy(p, s), m.Workloads, m.mesh, m.Services...)
		pr := m.policyReport(r, a, "ClusterRetryPolicy/"+p.Name)
		if s.Len() == 0 {
			pr.scopeText = "spec.namespaceSelector " + sel + " selects no namespace of the input"
		} else {
			pr.scopeText = "in namespace(s) " + strings.Join(s.Namespaces(), ", ") + " of spec.namespaceSelector " + sel
		}
		prs = append(prs, pr)
	}
	return prs, unchecked
}

func selectsAll(s *metav1.LabelSelector) bool {
	return s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

func renderSelector(s *metav1.LabelSelector) string {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%v", s)
	}
	return string(data)
}
