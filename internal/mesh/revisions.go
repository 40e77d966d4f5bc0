package mesh

import (
	"fmt"
	"strings"
)

// Istio revisions (canary upgrades, `helm install istiod-canary ... --set revision=canary`): each
// revision's istiod reads its own MeshConfig, ConfigMap istio-system/istio-<rev> (IsMeshConfig),
// and serves the sidecars it injected. Before, only istio-system/istio was read and a revision's
// defaultHttpRetryPolicy was counted among the ignored ConfigMaps: with `attempts: 5` there, the
// sidecars of that revision make 6 tries where retrycap said 3. Which revision injects a pod
// depends on labels and on revision tags (MutatingWebhookConfigurations the input may not hold),
// so the count is the worst of the MeshConfigs in the input, and the note says so.

// meshConfigs is what one MeshConfig ConfigMap sets: its defaultHttpRetryPolicy and its inbound
// policy (nil when it sets none).
type meshConfigs struct{ def, inbound *meshDefault }

// pickMeshConfig sets meshConfig, meshDefault and inbound from the MeshConfigs added: the one
// with the most retries (a MeshConfig without defaultHttpRetryPolicy counts Istio's 2); with
// one MeshConfig, its own as before.
func (s *Set) pickMeshConfig() {
	s.meshConfig = len(s.meshConfigs) > 0
	s.meshDefault, s.inbound = nil, nil
	names := sortedKeys(s.meshConfigs) // "istio" first: it wins a tie
	switch len(names) {
	case 0: // the last one removed (the manager's watch): Istio's own default again
		return
	case 1:
		c := s.meshConfigs[names[0]]
		s.meshDefault, s.inbound = c.def, c.inbound
		return
	}
	var each []string
	for i, n := range names {
		c := s.meshConfigs[n]
		d := c.def
		if d == nil {
			d = &meshDefault{retries: IstioDefaultRetries, object: "ConfigMap " + IstioConfigNamespace + "/" + n,
				note: fmt.Sprintf("ConfigMap %s/%s sets no defaultHttpRetryPolicy: %d", IstioConfigNamespace, n, IstioDefaultRetries)}
		}
		each = append(each, fmt.Sprintf("%s %d", n, d.retries))
		if i == 0 || d.retries > s.meshDefault.retries {
			s.meshDefault = d
		}
		if c.inbound != nil && (s.inbound == nil || c.inbound.retries > s.inbound.retries) {
			s.inbound = c.inbound
		}
	}
	worst := fmt.Sprintf(" (the most of %d Istio revisions' MeshConfigs: %s)", len(names), strings.Join(each, ", "))
	d := *s.meshDefault
	d.note += worst
	s.meshDefault = &d
	if s.inbound != nil {
		in := *s.inbound
		in.note += fmt.Sprintf(" (the most of %d Istio revisions' MeshConfigs)", len(names))
		s.inbound = &in
	}
}
