// Package webhook holds retrycap's five admission webhooks as thin admission.Handlers and their
// setup on the manager:
//   - the workload gate (GatePath; the decision is internal/gate's Decide),
//   - the mesh gate (MeshPath: the retry objects of every mesh API the manager reads, Istio
//     VirtualServices, Gateway API routes, Linkerd ServiceProfiles and HTTPRoutes, ..., judged
//     against both policy kinds; DecideMesh, over gate.Enforce; mesh_handler*.go; Istio
//     ServiceEntries, which have no retry field: DecideMeshServiceEntry, mesh_serviceentry.go,
//     refused or audited, never rewritten, as Kuma's MeshExternalServices and MeshHTTPRoutes,
//     which decide which calls a MeshRetry reaches (mesh_kuma_external.go); and the
//     ConfigMaps whose retries it counts, Istio's MeshConfigs and ingress-nginx's controller
//     ConfigMaps: DecideMeshConfigMap, mesh_configmap.go; and at MeshMembershipPath the
//     Namespace and Service labels and annotations that put workloads into a layer:
//     DecideMeshMembership, mesh_membership.go; both judge a Linkerd timeout raised on a route
//     other than an edge's counted one, mesh_linkerd_time.go, and DecideMesh the tries raised
//     on such a route, or a route created with tries, against maxTimeToAnswer,
//     mesh_alt_tries.go),
//   - the RetryPolicy validator (PolicyValidatorPath: what CEL in the CRD cannot check),
//   - the ClusterRetryPolicy validator (ClusterPolicyValidatorPath),
//   - the pod injector (PodInjectorPath; the decision is internal/inject's Decide).
//
// All of them read the one shared workload index (internal/index) the operator makes and
// internal/kubeobj feeds; setup without it is an error. A handler decodes the request, reads
// what the decision needs from the index and the manager's cache, calls the pure decision and
// writes the response; no admission request calls the API server, but for the one read the
// API server's own LimitRanger also makes: a namespace's LimitRanges the cache has none of, read
// live and kept 30 s (limitranges.go). Four of the webhooks are
// configured by hand in config/webhook/manifests.yaml: envtest installs exactly that file, so
// the tests exercise the shipped configuration. The mesh gate's configuration
// (MeshWebhookConfiguration, from MeshWebhook) the manager writes itself, with rules for the
// mesh APIs the cluster serves only, and rewrites as they change; its ConfigMap webhook
// (MeshConfigMapWebhook) has a match condition naming exactly the ConfigMaps the watcher reads,
// its membership webhook (MeshMembershipWebhook) one passing only a change of a key
// mesh.NamespaceKeys or mesh.ServiceKeys lists, or of a Service's spec.ports field a mesh decides
// a port's protocol by (mesh.PortFields), or of a waypoint Gateway's spec or
// mesh.WaypointGatewayKeys.
package webhook
