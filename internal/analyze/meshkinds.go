package analyze

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The mesh API groups the graph reads a kind of, and whose kinds retrycap knows whole, have a
// complete list of kinds by version: those whose vendored CRDs are the whole group (meshAPIKinds,
// meshkinds_gen.go: Istio's networking.istio.io, the Gateway API's gateway.networking.k8s.io in
// both channels, Envoy Gateway's gateway.envoyproxy.io), and Linkerd's linkerd.io and
// policy.linkerd.io, written by hand from a release's CRDs (linkerdAPIKinds,
// meshkinds_linkerd.go). A kind such a group does not define (networking.istio.io/v1
// VirtualServic, linkerd.io/v1alpha2 ServiceProfil) is an error: counted as ignored, its retries
// were not counted while the check passed, and the API server refuses it. The groups whose CRDs
// the repository has only in part (Kuma's, Dapr's, Consul's) are not checked: a list that lacks
// a real kind would refuse a real manifest.

// checkedMeshKinds are meshAPIKinds and linkerdAPIKinds: "group/version" -> kinds.
var checkedMeshKinds = func() map[string][]string {
	out := maps.Clone(meshAPIKinds)
	maps.Copy(out, linkerdAPIKinds) // no group in both: TestLinkerdAPIKinds
	return out
}()

// meshGroupKinds are the kinds of each group of checkedMeshKinds, in any of its versions, with
// the versions that serve each: "group" -> kind -> ["group/v1", ...].
var meshGroupKinds = func() map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for _, gv := range slices.Sorted(maps.Keys(checkedMeshKinds)) {
		group, _, _ := strings.Cut(gv, "/")
		if out[group] == nil {
			out[group] = map[string][]string{}
		}
		for _, k := range checkedMeshKinds[gv] {
			out[group][k] = append(out[group][k], gv)
		}
	}
	return out
}()

// unknownMeshKind refuses a kind that a mesh API group of checkedMeshKinds does not define in any
// version, with the group's kinds it misspells (in any version: GRPCRoutes under v1beta1 is
// nearest GRPCRoute, which only v1 serves). A kind the group defines in another version only (an old
// gateway.networking.k8s.io/v1alpha2 HTTPRoute), or in a version its CRDs do not serve, is read
// as before, with a warning naming the versions that serve it: an older install may serve it,
// and the graph reads the group's kinds whatever the version.
func (r Reader) unknownMeshKind(m *Manifests, src Source, tm *typeMeta) error {
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil
	}
	kinds, ok := meshGroupKinds[gv.Group]
	if !ok || gv.Group == "" {
		return nil
	}
	if slices.Contains(checkedMeshKinds[tm.APIVersion], tm.Kind) {
		return nil
	}
	kind := tm.Kind
	if base, list := strings.CutSuffix(kind, "List"); list && kinds[base] != nil {
		kind = base // a list of a known kind without items: nothing in it to read
	}
	if versions, ok := kinds[kind]; ok {
		if !slices.Contains(versions, tm.APIVersion) {
			m.warn(src, "%s: the %s CRDs retrycap knows serve %s as %s, not %s: read all the same (an older install may serve it; a current one refuses it)",
				r.ident(tm), gv.Group, kind, strings.Join(versions, ", "), tm.APIVersion)
		}
		return nil
	}
	return r.noSuchKind(src, tm, near(slices.Collect(maps.Keys(kinds)), tm.Kind))
}
