package workload

// gatewayEntrypoints makes each Service that a Gateway-parented HTTPRoute or GRPCRoute routes to
// (mesh.Set.Backends) a default entrypoint of r's graph when r's policy lists no entrypoints
// (DESIGN.md, "Mesh retry layers", the Gateway row): outside clients reach it through the
// Gateway, with the route's tries as their client attempts (1 x the layer's tries), whether or
// not services of the graph call it too. Only a Service of the policy's namespace (a cluster
// policy's: of its scope) that is a node of a selected workload counts.
func (r *Result) gatewayEntrypoints() {
	if r.mesh == nil {
		return
	}
	for _, ref := range r.mesh.Backends() {
		if !r.Policy.Scope().Has(ref.Namespace) {
			continue
		}
		node := r.Policy.Node(ref.Name, ref.Namespace)
		if !r.HasNode(node) {
			continue
		}
		e := r.mesh.Entry(ref)
		if len(e.Layers) == 0 {
			continue
		}
		m := MeshEdge{To: node, App: 1, Caller: "client attempts", Layers: e.Layers, Alternatives: r.mesh.EntryLayers(ref)}
		if r.MeshEntry == nil {
			r.MeshEntry = map[string]MeshEdge{}
		}
		r.MeshEntry[node] = m
		r.addMeshWarnings(e.Warnings)
		r.Graph.AddDefaultEntrypoint(node, m.Attempts())
	}
}
