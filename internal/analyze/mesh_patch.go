package analyze

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/retrycap/retrycap/internal/mesh"
)

// The mesh layer's part of -o patch (DESIGN.md, "Mesh retry layers": the rewrite planner may
// lower either layer; it lowers the mesh layer first when the app's value is 1, else the app's
// annotation). An edge u -> v carries the app's attempts times the mesh's tries; the whole-graph
// plan says how many the edge may carry, and this says which number to change.

// meshObject is a mesh object as read: its JSON (what the rewrite is applied to) and where.
type meshObject struct {
	src Source
	js  []byte
}

// keepMeshObject records a mesh object of the input by "Kind ns/name", the name mesh.Layer.Object
// gives it; a later one of the same name replaces it, as in the Set.
func (m *Manifests) keepMeshObject(src Source, js []byte, tm *typeMeta, defaultNS string) {
	ns := tm.Metadata.Namespace
	if ns == "" && tm.Kind != "Namespace" {
		ns = defaultNS
	}
	if m.meshObjects == nil {
		m.meshObjects = map[string]meshObject{}
	}
	if tm.Metadata.Namespace == "" && tm.Kind != "Namespace" {
		// The object was read into ns: its patch must say so, or kubectl applies it to
		// whatever namespace the context has.
		var obj map[string]any
		if json.Unmarshal(js, &obj) == nil {
			if md, ok := obj["metadata"].(map[string]any); ok {
				md["namespace"] = ns
				if out, err := json.Marshal(obj); err == nil {
					js = out
				}
			}
		}
	}
	m.meshObjects[tm.Kind+" "+ns+"/"+tm.Metadata.Name] = meshObject{src: src, js: js}
}

// MeshPatch is a mesh object's part of the combined fix: the object with its retry fields
// lowered.
type MeshPatch struct {
	// Object is "VirtualService bookinfo/ratings".
	Object string
	// Changes are the fields lowered, as suggestions ("spec.http[0].retries.attempts: 3 -> 0"),
	// in field-path order.
	Changes []string
	// JSON is the whole object with the fields lowered.
	JSON []byte
}

// meshDemand is the fewest tries some edge allows one layer's field.
type meshDemand struct {
	layer    mesh.Layer
	tries    int64
	policies []string
}

// planMesh turns the demands into patches of the objects read, one per object with every field
// of it lowered, and notes for the layers no object of the input declares (Istio's default, a
// MeshConfig) or whose object is not in the input.
func (m *Manifests) planMesh(demands map[string]*meshDemand) ([]Patch, []string) {
	keys := make([]string, 0, len(demands))
	for k := range demands {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var notes []string
	byObject := map[string]*Patch{}
	var order []string
	for _, k := range keys {
		d := demands[k]
		rw, give, err := mesh.LowestRewrite(d.layer, d.tries)
		if err != nil {
			if rw == nil {
				notes = append(notes, fmt.Sprintf("%s: %v", policyList(d.policies), err))
				continue
			}
			notes = append(notes, fmt.Sprintf("%s: %v; lowered below to %d tries, the fewest it gives", policyList(d.policies), err, give))
		}
		obj, ok := m.meshObjects[rw.Object]
		pt := byObject[rw.Object]
		if !ok {
			notes = append(notes, fmt.Sprintf("%s: %s (the object is not in the input)", policyList(d.policies), rw.Suggestion))
			continue
		}
		if pt == nil {
			pt = &Patch{Source: obj.src, Mesh: &MeshPatch{Object: rw.Object, JSON: obj.js}}
			byObject[rw.Object] = pt
			order = append(order, rw.Object)
		}
		// The changes as made: a VirtualService route lowered to attempts 0 may also get its
		// per-try timeout as its timeout (mesh.Rewrite.ApplyChanges).
		out, changes, err := rw.ApplyChanges(pt.Mesh.JSON)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", policyList(d.policies), err))
			continue
		}
		pt.Mesh.JSON = out
		pt.Mesh.Changes = append(pt.Mesh.Changes, changes...)
		for _, p := range d.policies {
			if !containsString(pt.Policies, p) {
				pt.Policies = append(pt.Policies, p)
			}
		}
	}
	sort.Strings(order)
	patches := make([]Patch, 0, len(order))
	for _, o := range order {
		if pt := byObject[o]; len(pt.Mesh.Changes) > 0 {
			patches = append(patches, *pt)
		}
	}
	return patches, notes
}
