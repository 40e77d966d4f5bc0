// Package inject decides whether a pod gets the retrycap proxy and renders the injected pod: the
// proxy as a native sidecar (an init container with restartPolicy Always) whose flags come from
// the pod's annotations and the strictest policy that selects it, a RetryPolicy or a
// ClusterRetryPolicy (workload.CompareRefs), and HTTP_PROXY/NO_PROXY in
// every app container so that standard HTTP clients send their calls through it. A policy of
// either kind is one workload.Policy here: its selection, its graph (IsEntrypoint) and its
// proxy settings (SettingsFor) are read through it.
//
// The pod's workload is the one the gate judged (workload.ForPodIn): a Deployment for its
// ReplicaSet's pods, a CronJob for the pods of the Jobs it made, so the proxy carries that
// workload's service name and entrypoint on every run.
//
// A pod the proxy cannot run in is skipped, naming the field and the value (conflicts.go): on
// the host network, on Windows nodes, or where its ports are taken (Istio's sidecar or ambient
// ztunnel, the labels and webhooks that make Istio's injector add its sidecar after
// retrycap's, Kuma's or Consul's sidecar on 15001, present or one their injector will add,
// Linkerd's classic sidecar whose iptables send the proxy's startup probe to a Linkerd proxy
// not yet started, an app's port, probe or hook on 15001 or 15020). What injection changes that the pod
// did not ask for (an envFrom that may set the proxy variables, a NO_PROXY of "*", a Guaranteed
// pod made Burstable) is a warning; pod-level resources make room for the sidecar's requests.
// The sidecar's requests and limits are defaults that the pod's retrycap.dev/proxy-cpu-request,
// -cpu-limit, -memory-request and -memory-limit annotations replace (on the pod, else on its
// Namespace: workload.ParseProxyResourcesIn), so that a namespace's LimitRange admits the pod (one whose Container item they break, or whose
// Pod item the pod breaks with the proxy and keeps without it, skips the pod as
// LimitRangeConflict, naming it; the proxy is judged with the LimitRanges' Container defaults the
// API server gives it, ephemeral-storage among them: limitrange.go); GOMAXPROCS follows the CPU limit annotation (workload.ParseProxyResources, the rules the gate and
// analyze judge a template by too). A value
// the rules refuse (not a quantity, a request above its limit, a memory limit below the proxy's
// floor) is InvalidAnnotation, naming the workload, the annotation and the value (and the
// Namespace, for one of its own). In an OpenShift namespace the proxy's runAsUser and runAsGroup
// come from the Namespace's UID and group ranges, as Istio's sidecar's do (ProxyIDs).
//
// It is pure: given the pod, its namespace's labels and annotations, the namespace's RetryPolicies and workloads,
// the ClusterRetryPolicies whose scope has the namespace and the workloads across their scopes,
// it returns the pod as it should be stored, or the reason it was skipped (a Skip; a policy whose
// settings the proxy would refuse, e.g. a duration out of the CRD's bounds, is InvalidPolicy
// naming the field and the value, never rendered or clamped: settings.go). The admission webhook
// (webhook.PodInjector) reads those inputs from the manager's cache and turns the result into a
// JSON patch; the golden files under testdata pin the output, and a test starts the real
// retrycap-proxy in --check mode with every rendered command line so the two cannot drift apart.
package inject
