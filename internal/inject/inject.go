package inject

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// Keys and names the injector writes. The annotation keys live here, next to the only code that
// writes them.
const (
	// SkippedAnnotation records on a pod that asked for the proxy (by namespace label or pod
	// annotation) why it did not get it: "<Reason>: <message>".
	SkippedAnnotation = "retrycap.dev/injection-skipped"
	// WarningsAnnotation records on an injected pod what the injector left alone, e.g. a
	// container that sets its own HTTP_PROXY: "; "-separated.
	WarningsAnnotation = "retrycap.dev/injection-warnings"
	// ContainerName is the proxy's init container; a pod that has it is never injected again.
	ContainerName = "retrycap-proxy"
)

// Decide is the whole injection decision for one pod: Skip set and Pod unchanged (or, for a pod
// that asked for the proxy, annotated with SkippedAnnotation), or Injected with the pod as it
// must be stored. in.Pod is never modified.
func Decide(cfg Config, in Input) Decision {
	pod := in.Pod.DeepCopy()
	d := Decision{Pod: pod}
	skip := func(r Reason, format string, a ...any) Decision {
		d.Skip = &Skip{Reason: r, Message: fmt.Sprintf(format, a...)}
		if r.Recorded() {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[SkippedAnnotation] = d.Skip.String()
		}
		return d
	}
	ns := pod.Namespace
	if slices.Contains(cfg.ExcludedNamespaces, ns) {
		return skip(ExcludedNamespace, "namespace %s is never injected", ns)
	}
	if why := injectedAlready(cfg, pod); why != "" {
		return skip(AlreadyInjected, "%s", why)
	}
	// The injected annotation without the proxy container is a copy, not an injection: a pod
	// template, or a pod made from a dump of an injected one, carries it into pods that have no
	// proxy. Taken as proof, it made every such pod skip injection in silence. Dropped here, so
	// that the pod is decided as any other and does not claim a proxy it lacks when skipped.
	if v, ok := pod.Annotations[annotations.InjectedStatus]; ok {
		delete(pod.Annotations, annotations.InjectedStatus)
		d.StaleInjected = v
		d.Warnings = append(d.Warnings, fmt.Sprintf("annotation %s=%q came without the %s container, so it was copied (from a pod template, or a dump of an injected pod), not written by an injection: it is removed and the pod decided as any other; the injector writes it on the pods it injects",
			annotations.InjectedStatus, workload.Clip(v), ContainerName))
	}
	optIn, optSet := pod.Annotations[annotations.Inject]
	switch {
	case optSet && optIn == "false":
		return skip(OptedOut, "annotation %s is %q", annotations.Inject, optIn)
	case optSet && optIn != "true":
		return skip(InvalidAnnotation, "annotation %s is %q: want \"true\" or \"false\"", annotations.Inject, optIn)
	case optIn != "true" && BadInjectionLabel(in.NamespaceLabels):
		// "true", "Enabled", "yes": the namespace's owner meant something, and the pods ran
		// without the proxy in silence (an ordinary NotEnabled skip). Recorded on the pods a
		// policy selects (the ones that would have been injected), not on every pod.
		v := in.NamespaceLabels[annotations.InjectionLabel]
		if sel, _, _ := selectingPolicies(in, workload.ForPodIn(pod, in.CronJobOf)); len(sel) > 0 {
			d.Policy = sel[0].policy
			return skip(InvalidNamespaceLabel, "namespace %s has label %s=%q: want %q (inject the pods a policy selects) or %q; %s selects the pod",
				ns, annotations.InjectionLabel, v, annotations.InjectionEnabled, annotations.InjectionDisabled, d.Policy)
		}
		return skip(NotEnabled, "namespace %s has label %s=%q, which is not %q, and no policy selects the pod",
			ns, annotations.InjectionLabel, v, annotations.InjectionEnabled)
	case optIn != "true" && in.NamespaceLabels[annotations.InjectionLabel] != annotations.InjectionEnabled:
		return skip(NotEnabled, "namespace %s is not labelled %s=%s and the pod is not annotated %s: \"true\"",
			ns, annotations.InjectionLabel, annotations.InjectionEnabled, annotations.Inject)
	}
	if why := foreignProxyName(cfg, pod); why != "" {
		return skip(ContainerNameConflict, "%s", why)
	}
	if pod.Spec.HostNetwork {
		return skip(HostNetwork, "the pod uses the host network, where the proxy's ports %s and %d would clash with other pods", ListenAddr, AdminPort)
	}
	if why := windowsPod(pod); why != "" {
		return skip(WindowsPod, "%s", why)
	}
	if why := portTaken(in.Mesh, pod, in.NamespaceLabels); why != "" {
		return skip(PortConflict, "%s: the proxy listens on %s and on port %d of every address of the pod", why, ListenAddr, AdminPort)
	}

	w := workload.ForPodIn(pod, in.CronJobOf)
	selecting, disabled, selErrs := selectingPolicies(in, w)
	if len(selecting) == 0 {
		if len(disabled) > 0 {
			d.Policy = disabled[0].policy
			return skip(InjectionDisabled, "%s selects the pod but has spec.injection.enabled false", d.Policy)
		}
		none := fmt.Sprintf("no RetryPolicy in namespace %s selects the pod", ns)
		if len(in.ClusterPolicies) > 0 {
			none = fmt.Sprintf("no RetryPolicy in namespace %s and no ClusterRetryPolicy selects the pod", ns)
		}
		if len(selErrs) > 0 {
			return skip(NoPolicy, "%s (%v)", none, errors.Join(selErrs...))
		}
		return skip(NoPolicy, "%s", none)
	}
	p := selecting[0]
	d.Policy = p.policy

	svc := w.ServiceName()
	if err := workload.EmptyServiceError(w); err != nil {
		return skip(InvalidAnnotation, "annotation %s: %v", annotations.Service, err.Err)
	}
	if reason := annotations.ValidateLabel(svc); reason != "" {
		return skip(InvalidAnnotation, "service name %q (from annotation %s, label %s or the workload's name) is not a DNS-1123 label: %s",
			svc, annotations.Service, annotations.NameLabel, reason)
	}
	ups, err := annotations.ParseUpstreams(pod.Annotations[annotations.Upstreams])
	if err != nil {
		return skip(InvalidAnnotation, "annotation %s %q: %v", annotations.Upstreams, pod.Annotations[annotations.Upstreams], err)
	}
	res, threads, resWarnings, err := proxyResources(w.String(), ns, in.NamespaceAnnotations, pod.Annotations)
	if err != nil {
		return skip(InvalidAnnotation, "%v", err)
	}
	uid, gid, err := ProxyIDs(ns, in.NamespaceAnnotations)
	if err != nil {
		return skip(InvalidAnnotation, "%v", err)
	}
	d.Warnings = append(d.Warnings, resWarnings...)
	settings, err := SettingsFor(p.policy)
	if err != nil {
		return skip(InvalidPolicy, "%v", err)
	}
	entry := isEntrypoint(p.policy, p.ws, w, in.Mesh, p.svcs...)
	args := ProxyArgs(svc, ups, entry, settings)

	proxy := proxyContainer(cfg.ProxyImage, args, res, threads, uid, gid)
	if why := limitRangeRefuses(ns, in.LimitRanges, pod, proxy); why != "" {
		return skip(LimitRangeConflict, "%s", why)
	}
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, proxy)
	podLevelRoom(pod, proxy.Resources.Requests)
	for i := range pod.Spec.Containers {
		d.Warnings = append(d.Warnings, setProxyEnv(&pod.Spec.Containers[i])...)
	}
	if pod.Spec.Resources == nil && !guaranteed(nil, []corev1.Container{proxy}) && guaranteed(in.Pod.Spec.InitContainers, in.Pod.Spec.Containers) {
		d.Warnings = append(d.Warnings, fmt.Sprintf("the pod's QoS class was Guaranteed and is Burstable with the proxy, whose requests are below its limits (CPU %s < %s, memory %s < %s); pod-level resources (spec.resources), or the annotations %s, keep it Guaranteed",
			proxy.Resources.Requests.Cpu(), proxy.Resources.Limits.Cpu(), proxy.Resources.Requests.Memory(), proxy.Resources.Limits.Memory(),
			strings.Join(annotations.ProxyResources, ", ")))
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[annotations.InjectedStatus] = p.policy.Ref().QualifiedName()
	delete(pod.Annotations, SkippedAnnotation)
	if len(d.Warnings) > 0 {
		pod.Annotations[WarningsAnnotation] = strings.Join(d.Warnings, "; ")
	}
	d.Injected = true
	return d
}

// Config is what does not change from pod to pod.
type Config struct {
	// ProxyImage is the sidecar's image (the manager's --proxy-image).
	ProxyImage string
	// ExcludedNamespaces are never injected: kube-system and the manager's own namespace.
	ExcludedNamespaces []string
}

// Input is one pod and what the decision reads about its namespace.
type Input struct {
	// Pod is the pod being created; its Namespace must be set.
	Pod *corev1.Pod
	// NamespaceLabels are the labels of the pod's namespace.
	NamespaceLabels map[string]string
	// NamespaceAnnotations are the annotations of the pod's namespace: the proxy resource
	// annotations the pod does not set (workload.ParseProxyResourcesIn) and OpenShift's UID and
	// group ranges (ProxyIDs).
	NamespaceAnnotations map[string]string
	// LimitRanges are the LimitRanges of the pod's namespace: a pod the API server would refuse
	// for its proxy's resources is skipped, naming the LimitRange (limitRangeRefuses).
	LimitRanges []corev1.LimitRange
	// Policies are the RetryPolicies of the pod's namespace.
	Policies []v1alpha1.RetryPolicy
	// Workloads are the namespace's workloads (of workload.Kinds),
	// used to tell whether the pod's service is a default entrypoint: one no selected service
	// calls. A policy that lists spec.entrypoints does not need them. Those that reach the pod's
	// service are enough (the manager passes index.Index.RelevantWorkloads).
	Workloads []workload.Workload
	// Services are the namespace's Services: a pod whose workload a Service fronts is an
	// entrypoint when that Service's node is (callers reach the Service).
	Services []workload.Service
	// ClusterPolicies are the ClusterRetryPolicies whose scope has the pod's namespace, each with
	// its scope; their selector is applied here. The strictest selecting policy of either kind
	// (workload.CompareRefs) is rendered.
	ClusterPolicies []ClusterPolicy
	// ClusterWorkloads and ClusterServices are, for the cluster policies, what Workloads and
	// Services are for the namespace's: the workloads (and Services) of the namespaces of their
	// scopes that reach the pod's service, from which a cluster policy's entrypoints are decided
	// on its graph across namespaces (index.Index.RelevantClusterWorkloads).
	ClusterWorkloads []workload.Workload
	ClusterServices  []workload.Service
	// Mesh is the mesh retry layers the gate counts (nil: none): a Service a Gateway-parented
	// route routes to is a default entrypoint of a policy that lists none; Istio's injection
	// webhooks it holds decide whether Istio will add its sidecar (mesh.Set.IstioWillInject).
	Mesh *mesh.Set
	// CronJobOf is the CronJob a Job of the pod's namespace belongs to (the webhook asks the
	// index: index.Index.CronJobOf). A pod of a Job a CronJob made is the CronJob's
	// (workload.ForPodIn): its proxy carries the CronJob's service name and entrypoint, the
	// workload the gate judged, not a Job named anew each run. nil: the pod's Job is its workload.
	CronJobOf func(job string) (string, bool)
}

// ClusterPolicy is a ClusterRetryPolicy with the namespaces it selects.
type ClusterPolicy struct {
	Policy *v1alpha1.ClusterRetryPolicy
	Scope  *workload.ClusterScope
}

// Decision is the outcome for one pod.
type Decision struct {
	// Pod is the pod as it should be stored: a modified copy when Injected or when the skip is
	// recorded (Skip.Reason.Recorded), else an unmodified copy.
	Pod *corev1.Pod
	// Injected is true when the proxy was added.
	Injected bool
	// Skip says why not, when !Injected.
	Skip *Skip
	// Policy is the policy (of either kind) whose settings were rendered or, for
	// InjectionDisabled, the strictest selecting policy; nil when none applies.
	Policy *workload.Policy
	// Warnings are what the injector left alone (also in WarningsAnnotation).
	Warnings []string
	// StaleInjected is the value of an injected annotation the pod arrived with but no proxy
	// container (copied from a template or a dump): Pod no longer has it, so it differs from the
	// pod as created even when the pod is not injected.
	StaleInjected string
}

// Skip is why a pod was not injected.
type Skip struct {
	Reason  Reason
	Message string
}

func (s *Skip) String() string { return string(s.Reason) + ": " + s.Message }

// Reason is a machine-readable skip reason, used as the event reason.
type Reason string

// Skip reasons.
const (
	// ExcludedNamespace: kube-system or the manager's own namespace.
	ExcludedNamespace Reason = "ExcludedNamespace"
	// AlreadyInjected: the pod has the injector's retrycap-proxy container (init or not; ownProxy).
	AlreadyInjected Reason = "AlreadyInjected"
	// OptedOut: annotation retrycap.dev/inject: "false".
	OptedOut Reason = "OptedOut"
	// NotEnabled: neither the namespace label nor the pod annotation asks for injection.
	NotEnabled Reason = "InjectionNotEnabled"
	// HostNetwork: the pod shares the node's network, where the proxy's fixed ports would clash.
	HostNetwork Reason = "HostNetwork"
	// WindowsPod: the pod runs on Windows nodes (spec.os.name, nodeSelector or required node
	// affinity), where neither the proxy's image nor its security context can run.
	WindowsPod Reason = "WindowsPod"
	// PortConflict: something in the pod already uses the proxy's ports (Istio's sidecar, or
	// the labels and webhooks that make Istio's injector add it, Kuma's or Consul's sidecar on
	// 15001, present or to come, Linkerd's classic sidecar holding 15020, a declared
	// containerPort, a probe or lifecycle hook on one of them, Istio's ambient mode).
	PortConflict Reason = "PortConflict"
	// NoPolicy: no RetryPolicy of the namespace selects the pod.
	NoPolicy Reason = "NoPolicy"
	// InjectionDisabled: every selecting policy has spec.injection.enabled false.
	InjectionDisabled Reason = "InjectionDisabled"
	// InvalidAnnotation: a retrycap annotation of the pod is malformed.
	InvalidAnnotation Reason = "InvalidAnnotation"
	// InvalidPolicy: the policy's settings would make the proxy refuse to start.
	InvalidPolicy Reason = "InvalidPolicy"
	// InvalidNamespaceLabel: the namespace's retrycap.dev/injection label is neither "enabled"
	// nor "disabled" ("true"), and a policy selects the pod.
	InvalidNamespaceLabel Reason = "InvalidNamespaceLabel"
	// LimitRangeConflict: a LimitRange of the namespace would make the API server refuse the
	// pod for the proxy's requests or limits.
	LimitRangeConflict Reason = "LimitRangeConflict"
	// ContainerNameConflict: the pod has a container of its own named retrycap-proxy (another
	// image, not rendered by the injector): container names are unique in a pod, so the proxy
	// cannot be added.
	ContainerNameConflict Reason = "ContainerNameConflict"
)

// Recorded reports whether the skip is recorded on the pod (SkippedAnnotation) and as an event:
// true for a pod that asked for the proxy and did not get it. The other skips (a namespace
// nobody enabled, an explicit opt-out, an excluded namespace, a pod already injected) are the
// ordinary case for most pods of a cluster and leave the pod untouched.
func (r Reason) Recorded() bool {
	switch r {
	case HostNetwork, WindowsPod, PortConflict, NoPolicy, InjectionDisabled, InvalidAnnotation, InvalidPolicy, InvalidNamespaceLabel, LimitRangeConflict, ContainerNameConflict:
		return true
	}
	return false
}

// BadInjectionLabel reports whether a namespace's labels hold retrycap.dev/injection with a
// value that is neither "enabled" nor "disabled".
func BadInjectionLabel(labels map[string]string) bool {
	v, ok := labels[annotations.InjectionLabel]
	return ok && v != annotations.InjectionEnabled && v != annotations.InjectionDisabled
}

// injectedAlready says why pod already has the proxy: its container, under the name the
// injector gives it and as the injector renders it (ownProxy). The injected annotation alone is
// no proof (Decide drops a copied one); a container of that name that is not the injector's is
// the pod's own (foreignProxyName).
func injectedAlready(cfg Config, pod *corev1.Pod) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == ContainerName && ownProxy(cfg, c) {
			return "init container " + ContainerName + " exists"
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == ContainerName && ownProxy(cfg, c) {
			return "container " + ContainerName + " exists"
		}
	}
	return ""
}

// ownProxy reports whether c is a proxy the injector rendered: the configured image, or (a pod
// injected by a manager with another --proxy-image: an upgrade, a mirror registry) the arguments
// every rendered proxy has, --listen on ListenAddr and --service (sidecar.Args.Render writes both
// always). The name alone made a pod's own container called retrycap-proxy (another image)
// a silent AlreadyInjected skip: the pod ran without the proxy and nobody was told.
func ownProxy(cfg Config, c corev1.Container) bool {
	if c.Image == cfg.ProxyImage {
		return true
	}
	listen := slices.Contains(c.Args, "--listen="+ListenAddr)
	service := slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--service=") })
	return listen && service
}

// foreignProxyName says which container of pod is named retrycap-proxy without being the
// injector's, or "": the proxy cannot be added beside it (container names are unique across a
// pod's init and app containers, so the API server would refuse the pod), and the pod asked for
// the proxy, so it is a recorded skip naming the container and its image.
func foreignProxyName(cfg Config, pod *corev1.Pod) string {
	for _, l := range []struct {
		field string
		cs    []corev1.Container
	}{{"spec.initContainers", pod.Spec.InitContainers}, {"spec.containers", pod.Spec.Containers}} {
		for i, c := range l.cs {
			if c.Name == ContainerName && !ownProxy(cfg, c) {
				return fmt.Sprintf("%s[%d] is named %s but is not retrycap's proxy (image %q, not %q, and no --listen=%s and --service= arguments): container names are unique in a pod, so the proxy cannot be added; rename the container",
					l.field, i, ContainerName, workload.Clip(c.Image), cfg.ProxyImage, ListenAddr)
			}
		}
	}
	return ""
}

// candidate is a selecting policy with what its graph is built from to decide the pod's
// entrypoint: the namespace's workloads and Services for a RetryPolicy, those reached across
// the scopes for a ClusterRetryPolicy.
type candidate struct {
	policy *workload.Policy
	ws     []workload.Workload
	svcs   []workload.Service
}

// selectingPolicies returns the policies of either kind that select w and have injection
// enabled, strictest first (workload.CompareRefs), the selecting ones with injection disabled
// (strictest first), and the errors of policies whose selector is invalid.
func selectingPolicies(in Input, w workload.Workload) (enabled, disabled []candidate, errs []error) {
	add := func(c candidate) {
		ok, err := c.policy.Selects(w)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !ok:
		case c.policy.Spec().Injection.Enabled != nil && !*c.policy.Spec().Injection.Enabled:
			disabled = append(disabled, c)
		default:
			enabled = append(enabled, c)
		}
	}
	for i := range in.Policies {
		add(candidate{policy: workload.ForRetryPolicy(&in.Policies[i]), ws: in.Workloads, svcs: in.Services})
	}
	for _, cp := range in.ClusterPolicies {
		add(candidate{policy: workload.ForClusterRetryPolicy(cp.Policy, cp.Scope), ws: in.ClusterWorkloads, svcs: in.ClusterServices})
	}
	// The injector renders enabled[0]: the same strictest policy the gate names first.
	byRef := func(a, b candidate) int { return workload.CompareRefs(a.policy.Ref(), b.policy.Ref()) }
	slices.SortStableFunc(enabled, byRef)
	slices.SortStableFunc(disabled, byRef)
	return enabled, disabled, errs
}

// IsEntrypoint reports whether one of w's nodes (its service name, or a Service fronting it:
// workload.ServiceSet.Nodes; "name.ns" for a ClusterRetryPolicy) is an entrypoint of p's graph,
// built by the shared builder from ws (of any namespaces; those outside p's scope are not
// selected) and svcs with w in place of its stored version: listed in spec.entrypoints, or,
// when the policy lists none, a selected node no selected node calls. The proxy's --entrypoint
// is fixed when the pod is created; a policy that lists its entrypoints makes it independent of
// the order in which workloads are deployed.
func IsEntrypoint(p *workload.Policy, ws []workload.Workload, w workload.Workload, svcs ...workload.Service) bool {
	return isEntrypoint(p, ws, w, nil, svcs...)
}

// isEntrypoint is IsEntrypoint on the graph with the mesh layers of set (the gate's).
func isEntrypoint(p *workload.Policy, ws []workload.Workload, w workload.Workload, set *mesh.Set, svcs ...workload.Service) bool {
	r := workload.BuildWith(p, ws, w, set, svcs...)
	nodes := r.Nodes(w.Key())
	if len(nodes) == 0 {
		return false
	}
	for _, e := range graph.Analyze(r.Graph, r.Cap).Entrypoints {
		if slices.Contains(nodes, e.Service) {
			return true
		}
	}
	return false
}
