package v1alpha1

// The MeshLayers condition of a RetryPolicy: which mesh APIs the manager reads the retry layers
// of (DESIGN.md, "Mesh retry layers"). Set only by a manager that watches mesh APIs
// (--mesh-apis other than none).
const (
	// ConditionMeshLayers is True when the manager reads at least one mesh API; its message names
	// them ("reads VirtualService networking.istio.io/v1, HTTPRoute gateway.networking.k8s.io/v1").
	ConditionMeshLayers = "MeshLayers"
	// ReasonMeshAPIsRead: the status counts the mesh layers of the APIs the message names.
	ReasonMeshAPIsRead = "MeshAPIsRead"
	// ReasonNoMeshAPIs: the cluster serves none of the mesh APIs retrycap reads (or --mesh-apis
	// selects none that it serves): the graph counts the applications' attempts only.
	ReasonNoMeshAPIs = "NoMeshAPIs"
)
