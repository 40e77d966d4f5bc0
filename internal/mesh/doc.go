// Package mesh reads the retry layers that a service mesh or a gateway adds to the edges of the
// graph (DESIGN.md, "Mesh retry layers"). Edges still come from retrycap.dev/upstreams; a mesh
// object only multiplies the tries on the edges into the Service it configures.
//
// A Set holds the mesh objects of one cluster or one manifest set: Namespaces (mesh membership
// labels and annotations), Services (waypoint labels, Linkerd retry annotations; the keys of
// both kinds it reads are NamespaceKeys and ServiceKeys, membership.go), the ConfigMap istio-system/istio
// and a revision's istio-system/istio-<rev> (MeshConfig defaultHttpRetryPolicy: the most of
// them, revisions.go), Istio VirtualServices and ServiceEntries (the external hosts whose
// calls take Istio's default route: serviceentry.go), Gateway API HTTPRoutes and
// GRPCRoutes, Linkerd's own HTTPRoutes and ServiceProfiles, Envoy Gateway
// BackendTrafficPolicies, Kuma, Dapr and Consul objects, and Gateway API Gateways (Istio ambient
// waypoints, whose layer is callee-side: waypoint.go), and networking.k8s.io/v1 Ingresses and
// IngressClasses (ingress-nginx's retries, and Istio's default ones on an Ingress of Istio's
// class: ingressnginx.go; the defaults an ingress-nginx controller's ConfigMap sets, found through
// its workload's configmap flag: ingressnginx_config.go, AddIngressNginxController), and Istio's
// injector's MutatingWebhookConfigurations (whose selectors then decide which pods Istio injects,
// Set.IstioWillInject: istiowebhooks.go). Objects
// go in as manifests (YAML or JSON, AddManifest), as unstructured
// objects (a dynamic client's or the manager's metadata-free cache, AddUnstructured) or as typed
// objects with their TypeMeta (AddObject); every path decodes the same small local structs, so the
// CLI, the controller and the gate read the same fields and report the same errors, which name
// the object, the field and the value.
//
// Then:
//
//   - Set.Edge(caller, v) answers the layers on an edge u -> v: u's namespace and pod-template
//     labels and annotations decide its mesh, v is the callee as the graph names it in u's
//     namespace view ("ratings", or "ratings.other" for another namespace; the longer forms
//     "v.ns.svc[.cluster.local]" are accepted too). Edge.Tries is the product of the layers:
//     the factor on u's own attempts. Set.EdgePort keeps only the layers whose mesh retries the
//     port called, each mesh reading the Service port's protocol its own way (ports.go); a
//     VirtualService route that delegates is read as Istio merges it (delegate.go).
//   - Set.Backends lists the Services that an HTTPRoute or GRPCRoute with a Gateway parentRef,
//     an Istio ingress VirtualService or an Ingress routes to, and Set.Entry(v) the north-south
//     factor on v's client attempts.
//   - Set.LayerTime(layer) gives the timeouts and backoff of a layer, from the object and rule
//     that decide its tries (VirtualService timeout and retries.perTryTimeout and backoff,
//     Gateway API timeouts and retry.backoff, Linkerd's timeout annotations as its proxy applies
//     them, its last try free of the retry timeout, Envoy Gateway's timeout and retry.perRetry),
//     and an Istio route's fault.delay or an Envoy Gateway policy's faultInjection.delay, held
//     once per request outside those timeouts (fault.go), for the time model (time.go).
//     Set.Hops, Set.CallHops (with Linkerd's routes, which depend on the caller) and
//     Set.EntryHops give a call's hops, one per route a request may take (the route of the
//     most tries need not be the slowest); Set.LinkerdRoutes names Linkerd's routes of a call
//     with the layer whose timeouts bound each (its own, else the Service's), for the mesh gate.
//   - PlanRewrite(layer, tries) says how to lower a layer's field: the suggestion string and an
//     edit, applied to the object's JSON (Rewrite.Patch gives the RFC 6902 patch), never out of
//     the CRD's bounds (a Gateway API rule: MinTries) nor into what the mesh's validation
//     refuses (a VirtualService's retries at attempts 0 keep attempts alone). Set.Lowered judges an edit on the decoded
//     object, and Set.Siblings and Set.EntrySiblings list the layers of an object that weigh on
//     the same edge, for the admission gate (rewrite_set.go).
//   - Split(app, layers, planned) divides an edge's planned tries between the caller's
//     annotation and as many of the edge's layers as it needs, in a stated order (split.go);
//     Fewest is the least an edge can carry under a fix, for the planner's floors.
//
// Every number is tries (1 = no retry). The package is pure: no clients, no cluster.
package mesh
