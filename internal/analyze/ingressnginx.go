package analyze

import (
	"slices"

	"github.com/retrycap/retrycap/internal/mesh"
)

// addNginxController offers a workload to the mesh Set as an ingress-nginx controller
// (mesh/ingressnginx_config.go): its --configmap names the ConfigMap whose keys set the defaults
// of the Ingresses it serves, and its --controller-class and --ingress-class which those are. A
// flag retrycap cannot resolve, or a bad value in the ConfigMap it names, is an input error.
func (r Reader) addNginxController(m *Manifests, src Source, js []byte, tm *typeMeta) []error {
	if apiGroup(tm.APIVersion) != "apps" || !slices.Contains(mesh.IngressNginxWorkloadKinds, tm.Kind) || !mesh.IsIngressNginxController(js) {
		// Not a controller: no mesh Set is made for it (Mesh stays nil without mesh objects).
		return nil
	}
	if _, err := m.meshSet(r.namespace()).AddIngressNginxController(js); err != nil {
		return []error{&InputError{src, err}}
	}
	return nil
}
