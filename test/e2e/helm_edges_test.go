package e2e

// The chart as a platform engineer installs it, at the edges of its values and of Helm's own
// arguments: an API server older than the chart needs, images pinned by digest, release names
// that cannot name a Service, the release in namespace default. Each was accepted before and
// failed later (a pod that never starts, InvalidImageName, a half-created release, workloads
// silently never gated); each is now refused at render, naming the value and the way out, or
// rendered as meant.

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// helmTemplateRelease is helmTemplate with another release name.
func helmTemplateRelease(t *testing.T, release, namespace string, args ...string) (string, string, error) {
	t.Helper()
	helm, root := helmBinary(t)
	cmd := exec.Command(helm, append([]string{"template", release, filepath.Join(root, "charts", "retrycap"), "--namespace", namespace}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// refused fails the test unless the render failed with nothing on stdout and want in its error.
func refused(t *testing.T, what, out, errOut string, err error, want string) {
	t.Helper()
	if err == nil || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("%s: err %v, stdout %d bytes, stderr %q; want it refused with %q", what, err, len(out), errOut, want)
	}
}

func TestHelmEdges(t *testing.T) {
	// A registry that pins images by digest: image.digest, as cert-manager's and Linkerd's charts
	// take it. Before, a digest in image.repository rendered "repo@sha256:...:v0.1.0" (the pods
	// stay in InvalidImageName) and one in image.tag "repo:sha256:..." (the same).
	t.Run("images pinned by digest", func(t *testing.T) {
		const d1 = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		const d2 = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
		var dep appsv1.Deployment
		renderHelm(t, "--set", "image.repository=registry.example:5000/rc/manager,image.digest="+d1+",proxyImage.repository=registry.example:5000/rc/proxy,proxyImage.digest="+d2).
			get(t, "Deployment", "retrycap-controller-manager", &dep)
		c := dep.Spec.Template.Spec.Containers[0]
		if want := "registry.example:5000/rc/manager@" + d1; c.Image != want {
			t.Errorf("image %q, want %q", c.Image, want)
		}
		if want := "--proxy-image=registry.example:5000/rc/proxy@" + d2; c.Args[4] != want {
			t.Errorf("args %q, want %q at [4]", c.Args, want)
		}
		for set, want := range map[string]string{
			"image.repository=registry.example/rc/manager@" + d1: "at '/image/repository': 'registry.example/rc/manager@" + d1 + "' does not match pattern",
			"image.tag=" + d1: "at '/image/tag': '" + d1 + "' does not match pattern",
			"proxyImage.repository=registry.example/rc/proxy@" + d2: "at '/proxyImage/repository': 'registry.example/rc/proxy@" + d2 + "' does not match pattern",
			"image.digest=sha256:0123":                              "at '/image/digest': 'sha256:0123' does not match pattern",
			"proxyImage.digest=" + d2[7:]:                           "at '/proxyImage/digest': '" + d2[7:] + "' does not match pattern",
		} {
			out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
			refused(t, "--set "+set, out, errOut, err, want)
		}
	})

	// Every object is named after the release, the webhook Service among them, and a Service's
	// name is a DNS-1035 label. Helm takes "my.rel" and "1rc" as release names; the install then
	// created the CRDs and five ClusterRoles and failed on the Service ("must not contain dots"),
	// leaving a failed release behind.
	t.Run("a release name that cannot name a Service is refused", func(t *testing.T) {
		for release, service := range map[string]string{"my.rel": "my.rel-retrycap-webhook-service", "1rc": "1rc-retrycap-webhook-service"} {
			out, errOut, err := helmTemplateRelease(t, release, installNamespace)
			refused(t, "release "+release, out, errOut, err, `release name "`+release+`": the chart names its objects after it, and the webhook Service's name "`+service+
				`" is not a DNS-1035 label (lowercase letters, digits and '-', starting with a letter); choose another release name`)
		}
		// The longest release name Helm takes (53 characters) is cut to 40 and still names a
		// Service (56 characters, at most 63).
		long := strings.Repeat("abcdefghij", 5) + "abc"
		out, errOut, err := helmTemplateRelease(t, long, installNamespace)
		if err != nil {
			t.Fatalf("release %s: %v\n%s", long, err, errOut)
		}
		objs := parseObjects(t, "helm template", []byte(out))
		if objs["Service "+long[:40]+"-webhook-service"] == nil {
			t.Errorf("release %s renders %q", long, objs.keys())
		}
	})

	// Every webhook skips the release's namespace (the manager must never judge itself), so a
	// release in default - `helm install` without -n - never gated nor injected anything in the
	// namespace most workloads of a first try are in, without a word.
	t.Run("the release in namespace default is refused", func(t *testing.T) {
		out, errOut, err := helmTemplate(t, "default")
		refused(t, "--namespace default", out, errOut, err, `the release is in namespace "default", and every webhook skips the release's namespace (the manager must never judge itself): workloads in default would never be gated nor injected; install into a namespace of its own: helm install retrycap charts/retrycap -n retrycap-system --create-namespace`)
	})
}

// A toleration's misspelt field was rendered, and the API server dropped it with a warning Helm
// prints among its logs (`unknown field "spec.template.spec.tolerations[0].opertor"`): the pod
// then tolerated key "dedicated" with operator Equal and value "", not the taint meant, and
// stayed Pending. The schema closes tolerations as it closes every other value.
func TestHelmTolerationsSchema(t *testing.T) {
	var dep appsv1.Deployment
	renderHelm(t, "--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists,tolerations[0].effect=NoSchedule,tolerations[1].key=node.kubernetes.io/unreachable,tolerations[1].operator=Exists,tolerations[1].effect=NoExecute,tolerations[1].tolerationSeconds=30").
		get(t, "Deployment", "retrycap-controller-manager", &dep)
	tol := dep.Spec.Template.Spec.Tolerations
	if len(tol) != 2 || tol[0].Key != "dedicated" || tol[0].Operator != "Exists" || tol[0].Effect != "NoSchedule" ||
		tol[1].TolerationSeconds == nil || *tol[1].TolerationSeconds != 30 {
		t.Errorf("tolerations %+v", tol)
	}
	for set, want := range map[string]string{
		"tolerations[0].key=dedicated,tolerations[0].opertor=Exists":     "at '/tolerations/0': additional properties 'opertor' not allowed",
		"tolerations[0].key=dedicated,tolerations[0].operator=exists":    "at '/tolerations/0/operator': value must be one of 'Exists', 'Equal'",
		"tolerations[0].key=dedicated,tolerations[0].effect=NoSchedulee": "at '/tolerations/0/effect': value must be one of '', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		refused(t, "--set "+set, out, errOut, err, want)
	}
}

// The budget's refusal of a minAvailable that keeps every replica read integers only: "100%"
// (or "51%" of two) was rendered, and every eviction of a manager pod was refused - kubectl
// drain never ends. A percentage is scaled as the disruption controller scales it (rounded up);
// a string that is no percentage ("abc") was rendered and refused by the API server midway
// through the install.
func TestHelmPodDisruptionBudgetPercent(t *testing.T) {
	const pdb = "PodDisruptionBudget retrycap-controller-manager"
	for set, present := range map[string]bool{"replicas=2,podDisruptionBudget.minAvailable=50%": true, "replicas=3,podDisruptionBudget.minAvailable=66%": true,
		"replicas=1,podDisruptionBudget.minAvailable=100%": false} {
		if got := renderHelm(t, "--set", set)[pdb] != nil; got != present {
			t.Errorf("--set %s: PodDisruptionBudget rendered %v, want %v", set, got, present)
		}
	}
	for set, want := range map[string]string{
		"replicas=2,podDisruptionBudget.minAvailable=100%": `podDisruptionBudget.minAvailable (100% of 2 replicas, rounded up: 2) must be below replicas (2): a budget that keeps every manager pod refuses every eviction, so kubectl drain of their nodes never ends; lower podDisruptionBudget.minAvailable, raise replicas, or set podDisruptionBudget.enabled=false`,
		"replicas=2,podDisruptionBudget.minAvailable=51%":  `podDisruptionBudget.minAvailable (51% of 2 replicas, rounded up: 2) must be below replicas (2): `,
		"replicas=3,podDisruptionBudget.minAvailable=67%":  `podDisruptionBudget.minAvailable (67% of 3 replicas, rounded up: 3) must be below replicas (3): `,
		"podDisruptionBudget.minAvailable=abc":             `at '/podDisruptionBudget/minAvailable': 'abc' does not match pattern`,
		"podDisruptionBudget.minAvailable=101%":            `at '/podDisruptionBudget/minAvailable': '101%' does not match pattern`,
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		refused(t, "--set "+set, out, errOut, err, want)
	}
}

// `--set KEY=null` is Helm's way to drop a default. For a value the templates read, that failed
// with a template's nil pointer (`--set webhooks=null`: "nil pointer evaluating interface
// {}.gate"), or rendered silently something else than the defaults say: `replicas=null` an empty
// replicas (one pod, no budget check), `webhooks.timeoutSeconds=null` the API server's 10 s,
// `crds.keep=null` CRDs without helm.sh/resource-policy: keep (helm uninstall then deletes every
// policy of the cluster). The schema requires them now, naming the path. Labels and the pod's
// optional settings may still be dropped.
func TestHelmNullValues(t *testing.T) {
	for set, want := range map[string]string{
		"crds":                                 "at '': missing property 'crds'",
		"crds.keep":                            "at '/crds': missing property 'keep'",
		"replicas":                             "at '': missing property 'replicas'",
		"image":                                "at '': missing property 'image'",
		"proxyImage":                           "at '': missing property 'proxyImage'",
		"webhooks":                             "at '': missing property 'webhooks'",
		"webhooks.gate":                        "at '/webhooks': missing property 'gate'",
		"webhooks.injector":                    "at '/webhooks': missing property 'injector'",
		"webhooks.validator":                   "at '/webhooks': missing property 'validator'",
		"webhooks.timeoutSeconds":              "at '/webhooks': missing property 'timeoutSeconds'",
		"excludedNamespaces":                   "at '': missing property 'excludedNamespaces'",
		"prometheus":                           "at '': missing property 'prometheus'",
		"prometheus.auth":                      "at '/prometheus': missing property 'auth'",
		"certificates":                         "at '': missing property 'certificates'",
		"certificates.mode":                    "at '/certificates': missing property 'mode'",
		"certificates.selfSigned":              "at '/certificates': missing property 'selfSigned'",
		"certificates.selfSigned.validityDays": "at '/certificates/selfSigned': missing property 'validityDays'",
		"namespace":                            "at '': missing property 'namespace'",
		"namespace.create":                     "at '/namespace': missing property 'create'",
		"podDisruptionBudget":                  "at '': missing property 'podDisruptionBudget'",
		"podDisruptionBudget.enabled":          "at '/podDisruptionBudget': missing property 'enabled'",
		"podDisruptionBudget.minAvailable":     "at '/podDisruptionBudget': missing property 'minAvailable'",
		"monitoring":                           "at '': missing property 'monitoring'",
		"monitoring.podMonitors":               "at '/monitoring': missing property 'podMonitors'",
		"monitoring.prometheusRule.enabled":    "at '/monitoring/prometheusRule': missing property 'enabled'",
		"monitoring.grafanaDashboard":          "at '/monitoring': missing property 'grafanaDashboard'",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", "certificates.mode=self-signed,prometheus.url=http://p:9090", "--set", set+"=null")
		refused(t, "--set "+set+"=null", out, errOut, err, want)
	}

	// What may be dropped: the labels of the monitoring objects, the manager's resources.
	objs := renderHelm(t, "--set", "monitoring.grafanaDashboard.enabled=true,monitoring.grafanaDashboard.labels=null,monitoring.podMonitors.enabled=true,monitoring.podMonitors.labels=null,monitoring.prometheusRule.enabled=true,monitoring.prometheusRule.labels=null")
	for _, k := range []string{"ConfigMap retrycap-dashboard", "PodMonitor retrycap-manager", "PodMonitor retrycap-proxies", "PrometheusRule retrycap-alerts"} {
		if u := objs[k]; u == nil || !maps.Equal(u.GetLabels(), map[string]string{"app.kubernetes.io/name": "retrycap"}) {
			t.Errorf("labels=null: %s rendered %v", k, u != nil)
		}
	}
	for _, set := range []string{"resources=null", "resources.limits=null", "image.tag=null", "tolerations=null", "nodeSelector=null"} {
		var dep appsv1.Deployment
		renderHelm(t, "--set", set).get(t, "Deployment", "retrycap-controller-manager", &dep)
	}
}

// Least privilege, as rendered: no wildcard anywhere, no Secret readable or writable by any
// role of the chart, and the manager's every write, exactly (its reads are the informers' get,
// list, watch). A new write in a +kubebuilder:rbac marker fails here until it is listed.
func TestHelmRBACLeastPrivilege(t *testing.T) {
	objs := renderHelm(t)
	var writes []string
	for _, k := range objs.keys() {
		u := objs[k]
		if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole // a Role's rules are the same type
		objs.get(t, u.GetKind(), u.GetName(), &role)
		for _, r := range role.Rules {
			for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
				if slices.Contains(list, "*") {
					t.Errorf("%s: a wildcard in %+v", k, r)
				}
			}
			if slices.Contains(r.Resources, "secrets") {
				t.Errorf("%s: grants %v on secrets", k, r.Verbs)
			}
			if u.GetName() != "retrycap-manager-role" && u.GetName() != "retrycap-leader-election-role" {
				continue
			}
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if v == "get" || v == "list" || v == "watch" {
						continue
					}
					w := fmt.Sprintf("%s %s %s/%s", u.GetName(), v, r.APIGroups, res)
					if len(r.ResourceNames) > 0 {
						w += fmt.Sprintf(" %v", r.ResourceNames)
					}
					writes = append(writes, w)
				}
			}
		}
	}
	slices.Sort(writes)
	want := []string{
		"retrycap-leader-election-role create [coordination.k8s.io]/leases",
		"retrycap-leader-election-role create []/events",
		"retrycap-leader-election-role delete [coordination.k8s.io]/leases",
		"retrycap-leader-election-role patch [coordination.k8s.io]/leases",
		"retrycap-leader-election-role patch []/events",
		"retrycap-leader-election-role update [coordination.k8s.io]/leases",
		"retrycap-manager-role create [admissionregistration.k8s.io]/mutatingwebhookconfigurations",
		"retrycap-manager-role create [events.k8s.io]/events",
		"retrycap-manager-role delete [admissionregistration.k8s.io]/mutatingwebhookconfigurations [retrycap-mesh]",
		"retrycap-manager-role patch [admissionregistration.k8s.io]/mutatingwebhookconfigurations [retrycap-mesh]",
		"retrycap-manager-role patch [events.k8s.io]/events",
		"retrycap-manager-role patch [retrycap.dev]/clusterretrypolicies/status",
		"retrycap-manager-role patch [retrycap.dev]/retrypolicies/status",
		"retrycap-manager-role update [admissionregistration.k8s.io]/mutatingwebhookconfigurations [retrycap-mesh]",
	}
	slices.Sort(want)
	if !slices.Equal(writes, want) {
		t.Errorf("the manager's writes:\n  %s\nwant:\n  %s", strings.Join(writes, "\n  "), strings.Join(want, "\n  "))
	}
}

// namespace.create renders the release's Namespace with pod-security enforce: restricted, and
// Helm owns it: in kube-system that label would forbid the privileged pods kube-system runs
// (kube-proxy, the CNI) at their next restart, and `helm uninstall` would delete kube-system.
func TestHelmNamespaceCreateRefusesSystemNamespaces(t *testing.T) {
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease"} {
		out, errOut, err := helmTemplate(t, ns, "--set", "namespace.create=true")
		refused(t, "-n "+ns+" --set namespace.create=true", out, errOut, err, `namespace.create=true in namespace "`+ns+
			`": the chart would own it (helm uninstall deletes it, and everything in it) and label it pod-security.kubernetes.io/enforce: restricted (its privileged pods could not start again); leave namespace.create false there`)
		if _, errOut, err := helmTemplate(t, ns); err != nil {
			t.Errorf("-n %s without namespace.create: %v\n%s", ns, err, errOut)
		}
	}
}

// An excluded namespace is matched by name (label kubernetes.io/metadata.name): a name no
// namespace can have ("Monitoring", "team_a") excluded nothing, silently. The schema takes
// namespace names only (DNS-1123 labels).
func TestHelmExcludedNamespacesAreNames(t *testing.T) {
	for set, want := range map[string]string{
		"excludedNamespaces={kube-system,Monitoring}": "at '/excludedNamespaces/1': 'Monitoring' does not match pattern",
		"excludedNamespaces={team_a}":                 "at '/excludedNamespaces/0': 'team_a' does not match pattern",
		"excludedNamespaces={-a}":                     "at '/excludedNamespaces/0': '-a' does not match pattern",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		refused(t, "--set "+set, out, errOut, err, want)
	}
	renderHelm(t, "--set", "excludedNamespaces={kube-system,cert-manager,team-a1}")
}

// Values the API server would refuse in the rendered objects are refused by the schema, naming
// the value's path and the value, before anything is installed. Before: each rendered, and
// `helm install` created the CRDs and the RBAC objects and then failed on the Deployment (a
// negative CPU request, a priorityClassName, an imagePullSecret or a Secret volume named
// "Bad_Name", a Secret key "../token" as a projected path) or the PodMonitor (a label key
// "Bad Key"), leaving a failed release behind.
func TestHelmSchemaRefusesWhatTheAPIServerWould(t *testing.T) {
	const subdomain = `'^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$'`
	for set, want := range map[string]string{
		"resources.requests.cpu=-1":                   "- at '/resources/requests/cpu': minimum: got -1, want 0\n",
		"resources.limits.memory=-512":                "- at '/resources/limits/memory': minimum: got -512, want 0\n",
		"priorityClassName=Bad_Name":                  "- at '/priorityClassName': 'Bad_Name' does not match pattern " + subdomain + "\n",
		"prometheus.auth.secretName=Bad_Name":         "- at '/prometheus/auth/secretName': 'Bad_Name' does not match pattern " + subdomain + "\n",
		"imagePullSecrets[0].name=Bad_Name":           "- at '/imagePullSecrets/0/name': 'Bad_Name' does not match pattern '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'\n",
		"prometheus.auth.bearerTokenKey=../token":     "- at '/prometheus/auth/bearerTokenKey': '../token' does not match pattern '^[-._a-zA-Z0-9]*$'\n",
		"monitoring.podMonitors.labels.Bad Key=x":     "- at '/monitoring/podMonitors/labels': additional properties 'Bad Key' not allowed\n",
		"nodeSelector.a/b/c=x":                        "- at '/nodeSelector': additional properties 'a/b/c' not allowed\n",
		"nodeSelector.disk=fast ssd":                  "- at '/nodeSelector/disk': 'fast ssd' does not match pattern '^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$'\n",
		"monitoring.prometheusRule.labels.team=-ops-": "- at '/monitoring/prometheusRule/labels/team': '-ops-' does not match pattern '^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$'\n",
		// Past 106751 days Sprig's genCA overflows Go's time.Duration: the certificate rendered
		// had notAfter in 1734, expired before it was issued, and the API server refused every
		// call to the webhooks (the gate's and the validator's Fail denied every workload).
		// Unbounded, past an int32 the install failed on the Deployment after the CRDs and the
		// cluster roles were created ("cannot unmarshal number 99999999999 into Go struct field
		// DeploymentSpec.spec.replicas of type int32"), a failed release left behind.
		"replicas=101":         "- at '/replicas': maximum: got 101, want 100\n",
		"replicas=99999999999": "- at '/replicas': maximum: got 9.9999999999×10¹⁰, want 100\n",
		"certificates.mode=self-signed,certificates.selfSigned.validityDays=106752": "- at '/certificates/selfSigned/validityDays': maximum: got 106,752, want 36,500\n",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		refused(t, "--set "+set, out, errOut, err, "Error: values don't meet the specifications of the schema(s) in the following chart(s):\nretrycap:\n"+want)
	}

	// What the API server takes still renders, as given.
	var dep appsv1.Deployment
	objs := renderHelm(t, "--set", `priorityClassName=system-cluster-critical,nodeSelector.kubernetes\.io/os=linux,imagePullSecrets[0].name=regcred.v2,resources.requests.cpu=0,monitoring.podMonitors.enabled=true,monitoring.podMonitors.labels.release=kube-prometheus-stack`)
	objs.get(t, "Deployment", "retrycap-controller-manager", &dep)
	spec := dep.Spec.Template.Spec
	if spec.PriorityClassName != "system-cluster-critical" || spec.NodeSelector["kubernetes.io/os"] != "linux" || spec.Containers[0].Resources.Requests.Cpu().String() != "0" {
		t.Errorf("rendered priorityClassName %q, nodeSelector %v, cpu request %s", spec.PriorityClassName, spec.NodeSelector, spec.Containers[0].Resources.Requests.Cpu())
	}
	// The pull secrets are the ServiceAccount's, as cert-manager's chart puts them.
	var sa corev1.ServiceAccount
	objs.get(t, "ServiceAccount", "retrycap-controller-manager", &sa)
	if len(sa.ImagePullSecrets) != 1 || sa.ImagePullSecrets[0].Name != "regcred.v2" {
		t.Errorf("ServiceAccount imagePullSecrets %v, want [regcred.v2]", sa.ImagePullSecrets)
	}
	if pm := objs["PodMonitor retrycap-manager"]; pm == nil {
		t.Errorf("no PodMonitor retrycap-manager among %q", objs.keys())
	} else if labels := pm.GetLabels(); labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PodMonitor labels %v, want release: kube-prometheus-stack among them", labels)
	}
}

// Prometheus credentials the manager refuses at start were rendered: the install succeeded and
// the manager pods then crash-looped (`--prometheus-username "u": --prometheus-password-file is
// required with it`), or a key without its Secret was dropped without a word (no CA: an https
// Prometheus then failed verification). Refused at render now, naming the values. With the url
// empty nothing is rendered, and nothing is checked (TestHelmValues: the url is the switch).
func TestHelmPrometheusAuthRefusedLikeTheManager(t *testing.T) {
	const url = "prometheus.url=https://prometheus.monitoring:9091,"
	for set, want := range map[string]string{
		url + "prometheus.auth.caKey=ca.crt":                                         `prometheus.auth.caKey "ca.crt": a key of the Secret prometheus.auth.secretName, which is empty; set prometheus.auth.secretName`,
		url + "prometheus.auth.bearerTokenKey=token":                                 `prometheus.auth.bearerTokenKey "token": a key of the Secret prometheus.auth.secretName, which is empty; set prometheus.auth.secretName`,
		url + "prometheus.auth.secretName=prom,prometheus.auth.username=retrycap":    `prometheus.auth.username "retrycap": basic auth needs prometheus.auth.passwordKey (the Secret's key holding the password)`,
		url + "prometheus.auth.secretName=prom,prometheus.auth.passwordKey=password": `prometheus.auth.passwordKey "password": basic auth needs prometheus.auth.username`,
		url + "prometheus.auth.serviceAccountToken=true,prometheus.auth.secretName=prom,prometheus.auth.username=u,prometheus.auth.passwordKey=pw": "prometheus.auth: a bearer token (serviceAccountToken or bearerTokenKey) and basic auth (username, passwordKey) exclude each other; keep one",
		url + "prometheus.auth.serviceAccountToken=true,prometheus.auth.secretName=prom,prometheus.auth.bearerTokenKey=token":                      `prometheus.auth: serviceAccountToken and bearerTokenKey "token" are two bearer tokens; keep one`,
		url + "prometheus.cluster= ": "- at '/prometheus/cluster': ' ' does not match pattern '^(.*\\\\S.*)?$'",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		refused(t, "--set "+set, out, errOut, err, want)
	}
}

// The longest validity the schema takes renders certificates valid for exactly that long (the
// bound is below Sprig's overflow at 106752 days: TestHelmSchemaRefusesWhatTheAPIServerWould).
func TestHelmSelfSignedLongestValidity(t *testing.T) {
	objs := renderHelm(t, "--set", "certificates.mode=self-signed,certificates.selfSigned.validityDays=36500")
	var secret corev1.Secret
	objs.get(t, "Secret", "webhook-server-cert", &secret)
	for _, key := range []string{"ca.crt", "tls.crt"} {
		c := parseCert(t, key, secret.Data[key])
		if got := c.NotAfter.Sub(c.NotBefore); got != 36500*24*time.Hour {
			t.Errorf("%s valid from %s to %s (%s), want 36500 days", key, c.NotBefore, c.NotAfter, got)
		}
	}
}
