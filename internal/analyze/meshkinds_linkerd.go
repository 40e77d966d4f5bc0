package analyze

// linkerdAPIKinds are the kinds each served version of Linkerd's linkerd.io and
// policy.linkerd.io groups serves, written by hand from the CustomResourceDefinitions of
// Linkerd's version-2.20 release (charts/linkerd-crds, as `linkerd install --crds` renders
// them): Linkerd's CRDs are not vendored (its module is not fetchable through the module
// proxy), so no test can derive this list as TestMeshAPIKindsFromCRDs derives meshAPIKinds.
// Deprecated versions still served (policy.linkerd.io/v1alpha1 Server and ServerAuthorization,
// v1beta1 Server) are listed: the API server serves them. Linkerd's Gateway API CRDs are the
// Gateway API's (meshAPIKinds); workload.linkerd.io and multicluster.linkerd.io are groups the
// graph reads no kind of, not checked. A Linkerd release that adds a kind to these groups is a
// row here (TestLinkerdAPIKinds checks its shape, not its completeness).
var linkerdAPIKinds = map[string][]string{
	"linkerd.io/v1alpha1":        {"ServiceProfile"},
	"linkerd.io/v1alpha2":        {"ServiceProfile"},
	"policy.linkerd.io/v1alpha1": {"AuthorizationPolicy", "EgressNetwork", "HTTPLocalRateLimitPolicy", "HTTPRoute", "MeshTLSAuthentication", "NetworkAuthentication", "Server", "ServerAuthorization"},
	"policy.linkerd.io/v1beta1":  {"HTTPRoute", "Server", "ServerAuthorization"},
	"policy.linkerd.io/v1beta2":  {"HTTPRoute", "Server"},
	"policy.linkerd.io/v1beta3":  {"HTTPRoute", "Server"},
}
