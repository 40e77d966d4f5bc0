package inject

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/sidecar"
	"github.com/retrycap/retrycap/internal/workload"
)

// Where the proxy listens, and what the app containers are told.
const (
	// ListenAddr is the proxy's data listener; loopback only, so nothing outside the pod uses it.
	ListenAddr = sidecar.DefaultListen
	// ListenPort is ListenAddr's port.
	ListenPort = sidecar.DefaultListenPort
	// ProxyURL is the HTTP_PROXY value of the app containers.
	ProxyURL = "http://" + ListenAddr
	// AdminPort serves /metrics, /healthz and /readyz.
	AdminPort = sidecar.DefaultAdminPort
	// AdminPortName names AdminPort on the container, for probes and scrape configs.
	AdminPortName = "retrycap-admin"
	// ProxyThreads is the sidecar's GOMAXPROCS (workload.ProxyThreads).
	ProxyThreads = workload.ProxyThreads
	// ProxyCPULimit is the sidecar's CPU limit (workload.ProxyCPULimit).
	ProxyCPULimit = workload.ProxyCPULimit
	// PodIPEnv holds the pod's IP (downward API) so that NO_PROXY can name it.
	PodIPEnv = "RETRYCAP_POD_IP"
	// RunAsUser is the proxy's uid: the "nonroot" user of distroless images.
	RunAsUser int64 = 65532
)

// NoProxy is what the app containers reach directly: loopback, the API server by its in-cluster
// names and by the address client-go's in-cluster config dials ($(KUBERNETES_SERVICE_HOST), the
// kubelet expands it from the kubernetes service's variables, which every container gets), and
// the pod itself. In-cluster services are deliberately absent: they are the upstreams the proxy
// must see. HTTPS_PROXY is set too (setProxyEnv): grpc-go reads only that variable, and through
// it opens a CONNECT whose h2c the proxy terminates and retries (docs/grpc.md); TLS in a CONNECT
// stays a blind tunnel, never retried. client-go's calls to the API server are TLS that the
// proxy could only tunnel, so they go direct by this list. Go's net/http never proxies loopback
// anyway; curl, Python and Node read this list.
var NoProxy = []string{
	"localhost", "127.0.0.1", "::1",
	"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
	"$(KUBERNETES_SERVICE_HOST)",
	"$(" + PodIPEnv + ")",
}

// ProxyArgs renders the proxy's command line (sidecar.Args.Render): the service, its upstreams as the annotation wrote them (canonical form; --default-attempts fills
// in a missing "=N"), whether it is an entrypoint, and the policy's settings.
// The pod's namespace reaches the proxy as $POD_NAMESPACE (proxyContainer), not as a flag.
func ProxyArgs(service string, ups []annotations.Upstream, entrypoint bool, s Settings) []string {
	return SidecarArgs(service, ups, entrypoint, s).Render()
}

// SidecarArgs is the proxy's configuration for a pod: the flag defaults, with what the pod and
// the policy say.
func SidecarArgs(service string, ups []annotations.Upstream, entrypoint bool, s Settings) sidecar.Args {
	a := sidecar.Defaults()
	a.Listen = ListenAddr
	a.Admin = ":" + strconv.Itoa(AdminPort)
	a.Service = service
	a.Upstreams = annotations.FormatUpstreams(ups)
	a.Entrypoint = entrypoint
	a.ChainCap = int(s.ChainCap)
	a.DefaultAttempts = int(s.DefaultAttempts)
	a.PerTryTimeout = s.PerTryTimeout
	a.BackoffBase = s.BackoffBase
	a.BackoffMax = s.BackoffMax
	a.RetryOn = strings.Join(s.RetryOn, ",")
	a.RetryMethods = slices.Clone(s.Methods)
	a.BudgetPercent = int(s.BudgetPercent)
	a.BudgetMinPerSecond = int(s.BudgetMinPerSecond)
	a.BudgetWindow = s.BudgetWindow
	a.BreakerFailures = int(s.BreakerFailures)
	a.BreakerWindow = s.BreakerWindow
	a.BreakerOpenFor = s.BreakerOpenFor
	if s.AccessLog != "" {
		a.AccessLog = s.AccessLog
	}
	a.MaxTimeToAnswer = s.MaxTimeToAnswer
	a.DedupUpstreams = dedupAmong(ups, s.DedupUpstreams)
	return a
}

// dedupAmong is the proxy's --dedup-upstreams: the pod's upstreams that the policy's
// dedupUpstreams names, compared as written (any case), as the proxy compares --dedup-upstreams
// with --upstreams: the policy names an upstream as the annotations do ("payment",
// "ledger.billing"). In the pod's upstreams' order, comma-separated; "" for none. A name the pod
// does not call is left out (the proxy refuses a name --upstreams does not list).
func dedupAmong(ups []annotations.Upstream, dedup []string) string {
	var out []string
	for _, u := range ups {
		if slices.ContainsFunc(dedup, func(d string) bool { return strings.EqualFold(d, u.Name) }) {
			out = append(out, u.Name)
		}
	}
	return strings.Join(out, ",")
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// proxyContainer is the sidecar: a native sidecar (restartPolicy Always) so the kubelet starts
// the app containers only once its startup probe passes and stops it only after they have
// stopped; unprivileged (no iptables: the apps reach it through HTTP_PROXY and HTTPS_PROXY).
// res and threads are its resources and GOMAXPROCS (proxyResources); uid and gid its
// runAsUser and runAsGroup (ProxyIDs).
func proxyContainer(image string, args []string, res corev1.ResourceRequirements, threads string, uid, gid int64) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	yes, no := true, false
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(AdminPortName)}},
			PeriodSeconds:    period,
			FailureThreshold: failures,
			TimeoutSeconds:   1,
			SuccessThreshold: 1,
		}
	}
	return corev1.Container{
		Name:            ContainerName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		RestartPolicy:   &always,
		Ports:           []corev1.ContainerPort{{Name: AdminPortName, ContainerPort: AdminPort, Protocol: corev1.ProtocolTCP}},
		// Two threads (Istio's sidecar default was 2 worker threads before it derived them from a
		// CPU limit): set, not derived from the default limit (ProxyCPULimit), else Go would size
		// itself to it, or to the node, one event loop (a thread, its buffers and its upstream
		// pool) per CPU. One under a CPU limit annotation of 1 CPU or less (proxyResources).
		// The pod's namespace (--namespace's default): which upstream names are of this namespace.
		Env: []corev1.EnvVar{
			{Name: "GOMAXPROCS", Value: threads},
			{Name: sidecar.NamespaceEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
		},
		// By default: the proxy targets <= 30 MiB RSS under load, and the memory limit leaves
		// room for a burst. A CPU limit too: a ResourceQuota on limits.cpu refuses a pod with any
		// container without one ("must specify limits.cpu for: retrycap-proxy"), and a namespace
		// with such a quota need not have a LimitRange whose defaults would fill it in (where it
		// has one, the API server's reinvoked LimitRanger does: limitrange.go) (ProxyCPULimit).
		// The pod's annotations may replace each (proxyResources).
		Resources: res,
		// Startup: the kubelet starts the next container only once the proxy listens (up to 30 s).
		StartupProbe:   probe("/readyz", 1, 30),
		ReadinessProbe: probe("/readyz", 5, 3),
		LivenessProbe:  probe("/healthz", 10, 3),
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             &yes,
			RunAsUser:                &uid,
			RunAsGroup:               &gid,
			ReadOnlyRootFilesystem:   &yes,
			AllowPrivilegeEscalation: &no,
			Privileged:               &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// podLevelRoom makes room for the sidecar in the pod's own requests and limits (spec.resources,
// pod-level resources), where the pod sets them: the API server refuses a pod whose containers'
// requests add up to more than its pod-level request ("must be greater than or equal to
// aggregate container requests"), so a pod whose request was exactly its containers' could not
// be created with the proxy. The sidecar's requests are added to both, so that a pod-level
// request equal to the limit (Guaranteed) stays so; the sidecar's own limits still bound it.
func podLevelRoom(pod *corev1.Pod, sidecar corev1.ResourceList) {
	r := pod.Spec.Resources
	if r == nil {
		return
	}
	for name, q := range sidecar {
		for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
			if v, ok := l[name]; ok {
				v.Add(q)
				l[name] = v
			}
		}
	}
}

// setProxyEnv points an app container at the proxy: RETRYCAP_POD_IP first (a $(VAR) reference
// only sees variables defined before it), then HTTP_PROXY and http_proxy, HTTPS_PROXY and
// https_proxy (grpc-go's), and NO_PROXY and no_proxy. What the container already sets is never
// clobbered silently:
//   - its own HTTP_PROXY or http_proxy (a corporate egress proxy, say), or ALL_PROXY or
//     all_proxy, wins: the container is left unchanged, and a warning says its calls bypass
//     retrycap;
//   - its own HTTPS_PROXY or https_proxy wins too: both are left as they are (HTTP_PROXY and
//     NO_PROXY are still set), and a warning says its gRPC calls bypass retrycap;
//   - its own NO_PROXY / no_proxy value is kept and retrycap's entries are appended where
//     missing, in both spellings;
//   - a NO_PROXY taken from a ConfigMap or Secret cannot be merged: it is kept as is, with a
//     warning;
//   - variables from envFrom (a ConfigMap or Secret the injector cannot read) lose to env
//     entries: a source that may hold one of the proxy variables gets a warning
//     (envFromProxyWarning).
//
// It returns the warnings.
func setProxyEnv(c *corev1.Container) []string {
	// ALL_PROXY too: curl, libcurl and Python take it for every scheme without a proxy of its
	// own, so an HTTP_PROXY of retrycap's would take the container's HTTP calls from its egress
	// proxy to one that dials out directly.
	for _, name := range []string{"HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		if i := lastEnv(c.Env, name); i >= 0 {
			return []string{fmt.Sprintf("container %s sets %s itself, so its calls do not go through the retrycap proxy", c.Name, name)}
		}
	}
	var warnings []string
	if w := envFromProxyWarning(c); w != "" {
		warnings = append(warnings, w)
	}
	env := make([]corev1.EnvVar, 0, len(c.Env)+7)
	if lastEnv(c.Env, PodIPEnv) < 0 {
		env = append(env, corev1.EnvVar{Name: PodIPEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}})
	}
	env = append(env, c.Env...)
	env = append(env, corev1.EnvVar{Name: "HTTP_PROXY", Value: ProxyURL}, corev1.EnvVar{Name: "http_proxy", Value: ProxyURL})
	ownHTTPS := ""
	for _, name := range []string{"HTTPS_PROXY", "https_proxy"} {
		if ownHTTPS == "" && lastEnv(c.Env, name) >= 0 {
			ownHTTPS = name
		}
	}
	if ownHTTPS != "" {
		warnings = append(warnings, fmt.Sprintf("container %s sets %s itself, so its gRPC calls do not go through the retrycap proxy", c.Name, ownHTTPS))
	} else {
		env = append(env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: ProxyURL}, corev1.EnvVar{Name: "https_proxy", Value: ProxyURL})
	}

	upper, lower := lastEnv(env, "NO_PROXY"), lastEnv(env, "no_proxy")
	var fromRef string
	for _, i := range []int{upper, lower} {
		if i >= 0 && env[i].ValueFrom != nil {
			fromRef = env[i].Name
		}
	}
	if fromRef != "" {
		warnings = append(warnings, fmt.Sprintf("container %s takes %s from a ConfigMap or Secret, so retrycap could not add loopback, the API server and the pod's IP to it", c.Name, fromRef))
	} else {
		var existing []string
		for _, i := range []int{upper, lower} {
			if i < 0 {
				continue
			}
			existing = append(existing, env[i].Value)
			// "*" bypasses every proxy (curl, Go, Python, Node): kept, as the container's choice,
			// but not in silence.
			if slices.Contains(strings.Split(strings.ReplaceAll(env[i].Value, " ", ""), ","), "*") {
				warnings = append(warnings, fmt.Sprintf("container %s sets %s to %q, which bypasses every proxy, so its calls do not go through the retrycap proxy", c.Name, env[i].Name, env[i].Value))
			}
		}
		merged := mergeList(existing, NoProxy)
		for _, name := range []string{"NO_PROXY", "no_proxy"} {
			if i := lastEnv(env, name); i >= 0 {
				env[i].Value = merged
			} else {
				env = append(env, corev1.EnvVar{Name: name, Value: merged})
			}
		}
	}
	c.Env = env
	return warnings
}

// lastEnv is the index of the last variable called name (the one that takes effect), or -1.
func lastEnv(env []corev1.EnvVar, name string) int {
	for i := len(env) - 1; i >= 0; i-- {
		if env[i].Name == name {
			return i
		}
	}
	return -1
}

// mergeList joins comma-separated lists, keeping the first occurrence of each entry in order.
func mergeList(lists []string, extra []string) string {
	var out []string
	seen := map[string]bool{}
	add := func(e string) {
		e = strings.TrimSpace(e)
		if e != "" && !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	for _, l := range lists {
		for _, e := range strings.Split(l, ",") {
			add(e)
		}
	}
	for _, e := range extra {
		add(e)
	}
	return strings.Join(out, ",")
}
