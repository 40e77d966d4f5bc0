package analyze

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/retrycap/retrycap/internal/mesh"
)

// Mesh retry layers (DESIGN.md, "Mesh retry layers"): the Namespaces, Services, the ConfigMap
// istio-system/istio and the mesh and gateway routes of the input go into one mesh.Set, which
// multiplies the attempts on the edges into the Services they configure (workload.Build with the mesh Set).

// meshSet returns m's mesh Set, made on first use with m.MeshOptions and objects without a
// namespace in ns.
func (m *Manifests) meshSet(ns string) *mesh.Set {
	if m.mesh == nil {
		opts := m.MeshOptions
		if opts.DefaultNamespace == "" {
			opts.DefaultNamespace = ns
		}
		m.mesh = mesh.NewSet(opts)
	}
	return m.mesh
}

// Mesh returns the mesh Set of the objects read (nil when none was).
func (m *Manifests) Mesh() *mesh.Set { return m.mesh }

// addMesh adds an object mesh.Set reads (a Namespace, a Service, a ConfigMap, a VirtualService,
// a route, ...) to m's Set; an invalid retry field is an input error.
func (r Reader) addMesh(m *Manifests, src Source, js []byte, tm *typeMeta) []error {
	if !mesh.Reads(tm.APIVersion, tm.Kind) {
		return nil
	}
	if _, err := m.meshSet(r.namespace()).AddJSON(js); err != nil {
		return []error{&InputError{src, err}}
	}
	m.keepMeshObject(src, js, tm, r.namespace())
	if tm.Metadata.Namespace == "" && routeKinds[tm.Kind] {
		m.unnamespacedRoutes = append(m.unnamespacedRoutes, unnamespacedRoute{src: src, kind: tm.Kind, ns: r.namespace(), name: tm.Metadata.Name})
	}
	return nil
}

// SetMeshedNamespace says that namespace ns is in a mesh ("istio" or "linkerd") when its
// Namespace object is not in the input (--meshed-namespace): it stands for a Namespace with
// sidecar injection on, and replaces one read from the input.
func (m *Manifests) SetMeshedNamespace(ns, meshName string) error {
	meta := map[string]any{"name": ns}
	switch strings.ToLower(meshName) {
	case "istio":
		meta["labels"] = map[string]string{"istio-injection": "enabled"}
	case "linkerd":
		meta["annotations"] = map[string]string{"linkerd.io/inject": "enabled"}
	default:
		return fmt.Errorf("namespace %s: unknown mesh %q (istio or linkerd)", ns, meshName)
	}
	js, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
	if err != nil {
		return err
	}
	_, err = m.meshSet(ns).AddJSON(js)
	return err
}
