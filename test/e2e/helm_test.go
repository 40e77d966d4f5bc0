package e2e

// The Helm chart (charts/retrycap) against the kustomize install (config/): one source of truth.
// With its default values the chart renders exactly the objects `kubectl kustomize config/default`
// renders, its monitoring objects are those of config/prometheus and config/grafana, every value
// does what values.yaml says, and the rendered output is accepted by a real API server (server-side
// dry run). Helm is the CLI pinned in hack/helm/go.mod, built into the cache by hack/helm-bin.sh.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/controlplane"
)

// helmRelease is the release name that gives config/default's names (namePrefix "retrycap-").
const helmRelease = "retrycap"

// certManagerModule holds the cert-manager CRDs the dry run installs (its deploy/crds).
const certManagerModule = "github.com/cert-manager/cert-manager@v1.21.2"

// helmBinary builds (or finds in the cache) the pinned helm and returns its path.
func helmBinary(t *testing.T) (helm, root string) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "helm-bin.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/helm-bin.sh: %v", err)
	}
	return strings.TrimSpace(string(out)), root
}

// helmTemplate runs `helm template retrycap charts/retrycap -n <namespace>` with extra args and
// returns its stdout, its stderr and the error of a non-zero exit.
func helmTemplate(t *testing.T, namespace string, args ...string) (string, string, error) {
	t.Helper()
	helm, root := helmBinary(t)
	cmd := exec.Command(helm, append([]string{"template", helmRelease, filepath.Join(root, "charts", "retrycap"), "--namespace", namespace}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// renderHelm is helmTemplate in the install namespace that must succeed, parsed by "Kind name".
func renderHelm(t *testing.T, args ...string) rendered {
	t.Helper()
	out, errOut, err := helmTemplate(t, installNamespace, args...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return parseObjects(t, "helm template", []byte(out))
}

// renderKustomize renders a config/ directory with the real `kubectl kustomize`.
func renderKustomize(t *testing.T, dir string) rendered {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := controlplane.AssetsDir(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(root, "config", dir))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v\n%s", dir, err, stderr.String())
	}
	return parseObjects(t, "config/"+dir, stdout.Bytes())
}

// parseObjects reads a multi-document YAML stream into objects by "Kind name".
func parseObjects(t *testing.T, what string, data []byte) rendered {
	t.Helper()
	objs := rendered{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: document: %v\n%s", what, err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		key := u.GetKind() + " " + u.GetName()
		if objs[key] != nil {
			t.Fatalf("%s renders %s twice", what, key)
		}
		objs[key] = u
	}
	return objs
}

func (r rendered) keys() []string {
	return slices.Sorted(maps.Keys(r))
}

// without returns r less the objects of other (by key).
func (r rendered) without(other rendered) rendered {
	out := rendered{}
	for k, u := range r {
		if other[k] == nil {
			out[k] = u
		}
	}
	return out
}

// compareObjects fails the test unless got and want hold the same objects with the same content.
// Nothing is normalised: the chart adds no Helm-only labels or annotations (the CRDs'
// helm.sh/resource-policy is checked and removed by kept before).
func compareObjects(t *testing.T, gotName string, got rendered, wantName string, want rendered) {
	t.Helper()
	if !slices.Equal(got.keys(), want.keys()) {
		t.Errorf("%s renders\n  %s\n%s renders\n  %s", gotName, strings.Join(got.keys(), "\n  "), wantName, strings.Join(want.keys(), "\n  "))
	}
	for _, k := range want.keys() {
		g := got[k]
		if g == nil {
			continue
		}
		if !reflect.DeepEqual(g.Object, want[k].Object) {
			gy, _ := yaml.Marshal(g.Object)
			wy, _ := yaml.Marshal(want[k].Object)
			t.Errorf("%s differs.\n%s:\n%s\n%s:\n%s\nfirst difference: %s", k, gotName, gy, wantName, wy, firstDifference(string(gy), string(wy)))
		}
	}
}

// firstDifference names the first line where two renderings part.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d: %q vs %q", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d vs %d lines)", len(al), len(bl))
}

// kept checks that both CRDs carry helm.sh/resource-policy: keep (crds.keep, the default: helm
// uninstall would otherwise delete every policy of the cluster with them) and removes it, the
// one thing the chart adds to config/default's objects.
func kept(t *testing.T, objs rendered) rendered {
	t.Helper()
	for _, name := range []string{"retrypolicies.retrycap.dev", "clusterretrypolicies.retrycap.dev"} {
		u := objs["CustomResourceDefinition "+name]
		if u == nil {
			t.Fatalf("no CustomResourceDefinition %s", name)
		}
		a := u.GetAnnotations()
		if a["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CustomResourceDefinition %s: annotations %v, want helm.sh/resource-policy: keep", name, a)
		}
		delete(a, "helm.sh/resource-policy")
		u.SetAnnotations(a)
	}
	return objs
}

func TestHelmChartMatchesKustomize(t *testing.T) {
	kustomized := renderDefault(t)

	t.Run("default values and namespace.create render config/default exactly", func(t *testing.T) {
		compareObjects(t, "helm template (defaults, namespace.create=true)", kept(t, renderHelm(t, "--set", "namespace.create=true")), "config/default", kustomized)
	})

	t.Run("default values render config/default without its Namespace", func(t *testing.T) {
		got := kept(t, renderHelm(t))
		want := kustomized.without(rendered{"Namespace " + installNamespace: kustomized["Namespace "+installNamespace]})
		compareObjects(t, "helm template (defaults)", got, "config/default less the Namespace", want)
	})

	t.Run("crds.keep=false renders config/default's CRDs exactly", func(t *testing.T) {
		compareObjects(t, "helm template (crds.keep=false, namespace.create=true)", renderHelm(t, "--set", "crds.keep=false,namespace.create=true"), "config/default", kustomized)
	})

	t.Run("the monitoring values render config/prometheus and config/grafana exactly", func(t *testing.T) {
		all := renderHelm(t, "--set", "monitoring.podMonitors.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboard.enabled=true")
		monitoring := all.without(renderHelm(t))
		want := renderKustomize(t, "prometheus")
		grafana := renderKustomize(t, "grafana")
		for k, u := range grafana {
			want[k] = u
		}
		compareObjects(t, "helm template (monitoring enabled) less the defaults", monitoring, "config/prometheus + config/grafana", want)
		if want := []string{"ConfigMap retrycap-dashboard", "PodMonitor retrycap-manager", "PodMonitor retrycap-proxies", "PrometheusRule retrycap-alerts"}; !slices.Equal(monitoring.keys(), want) {
			t.Errorf("monitoring objects %q, want %q", monitoring.keys(), want)
		}
	})
}

func TestHelmValues(t *testing.T) {
	deployment := func(t *testing.T, objs rendered) appsv1.Deployment {
		var dep appsv1.Deployment
		objs.get(t, "Deployment", "retrycap-controller-manager", &dep)
		return dep
	}
	type webhook struct {
		name   string
		policy admissionregistrationv1.FailurePolicyType
		sel    *metav1.LabelSelector
		cc     admissionregistrationv1.WebhookClientConfig
	}
	webhooks := func(t *testing.T, objs rendered) (map[string]webhook, map[string]map[string]string) {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		objs.get(t, "MutatingWebhookConfiguration", "retrycap-mutating-webhook-configuration", &mwc)
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		objs.get(t, "ValidatingWebhookConfiguration", "retrycap-validating-webhook-configuration", &vwc)
		whs := map[string]webhook{}
		for _, w := range mwc.Webhooks {
			whs[w.Name] = webhook{w.Name, *w.FailurePolicy, w.NamespaceSelector, w.ClientConfig}
		}
		for _, w := range vwc.Webhooks {
			whs[w.Name] = webhook{w.Name, *w.FailurePolicy, w.NamespaceSelector, w.ClientConfig}
		}
		return whs, map[string]map[string]string{mwc.Name: mwc.Annotations, vwc.Name: vwc.Annotations}
	}

	t.Run("replicas, images, mesh APIs", func(t *testing.T) {
		dep := deployment(t, renderHelm(t, "--set", "replicas=3,image.repository=registry.example/rc/manager,image.tag=v9.8.7,image.pullPolicy=Always",
			"--set", "proxyImage.repository=registry.example/rc/proxy,proxyImage.tag=v9.8.6",
			"--set", "meshAPIs={virtualservices.networking.istio.io,httproutes.gateway.networking.k8s.io}"))
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
			t.Errorf("replicas %v, want 3", dep.Spec.Replicas)
		}
		c := dep.Spec.Template.Spec.Containers[0]
		if c.Image != "registry.example/rc/manager:v9.8.7" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %q pull policy %q", c.Image, c.ImagePullPolicy)
		}
		wantArgs := []string{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--webhook-port=9443",
			"--proxy-image=registry.example/rc/proxy:v9.8.6", "--mesh-apis=virtualservices.networking.istio.io,httproutes.gateway.networking.k8s.io"}
		if !slices.Equal(c.Args, wantArgs) {
			t.Errorf("args %q, want %q", c.Args, wantArgs)
		}
	})

	t.Run("Prometheus URL and credentials", func(t *testing.T) {
		base := []string{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--webhook-port=9443",
			"--proxy-image=retrycap/retrycap-proxy:v1"}
		for _, tc := range []struct {
			name  string
			set   string
			args  []string
			mount bool
		}{
			{"credentials without a URL render nothing", "prometheus.auth.serviceAccountToken=true,prometheus.auth.secretName=prom", nil, false},
			{"the ServiceAccount's token", "prometheus.url=http://prometheus.monitoring:9090,prometheus.interval=30s,prometheus.window=10m,prometheus.auth.serviceAccountToken=true",
				[]string{"--prometheus-url=http://prometheus.monitoring:9090", "--prometheus-interval=30s", "--prometheus-window=10m",
					"--prometheus-bearer-token-file=/var/run/secrets/kubernetes.io/serviceaccount/token"}, false},
			{"basic auth and a CA from a Secret", "prometheus.url=https://prometheus.monitoring:9090,prometheus.auth.secretName=prom,prometheus.auth.username=retrycap,prometheus.auth.passwordKey=password,prometheus.auth.caKey=ca.crt",
				[]string{"--prometheus-url=https://prometheus.monitoring:9090", "--prometheus-username=retrycap",
					"--prometheus-password-file=/etc/retrycap/prometheus/password", "--prometheus-ca-file=/etc/retrycap/prometheus/ca.crt"}, true},
			{"an interval and a window in milliseconds the manager takes", "prometheus.url=http://prometheus.monitoring:9090,prometheus.interval=1500ms,prometheus.window=90000ms",
				[]string{"--prometheus-url=http://prometheus.monitoring:9090", "--prometheus-interval=1500ms", "--prometheus-window=90000ms"}, false},
			{"a larger answer bound", "prometheus.url=http://prometheus.monitoring:9090,prometheus.maxAnswerSize=128Mi",
				[]string{"--prometheus-url=http://prometheus.monitoring:9090", "--prometheus-max-answer-size=128Mi"}, false},
			{"one Istio cluster of several, and Thanos's replica label", "prometheus.url=http://prometheus.monitoring:9090,prometheus.istioCluster=east,prometheus.replicaLabels={replica,prometheus_replica}",
				[]string{"--prometheus-url=http://prometheus.monitoring:9090", "--prometheus-istio-cluster=east", "--prometheus-replica-label=replica", "--prometheus-replica-label=prometheus_replica"}, false},
			{"one cluster of several by an external label", "prometheus.url=http://prometheus.monitoring:9090,prometheus.cluster=east,prometheus.clusterLabels={cluster,k8s_cluster_name}",
				[]string{"--prometheus-url=http://prometheus.monitoring:9090", "--prometheus-cluster=east", "--prometheus-cluster-label=cluster", "--prometheus-cluster-label=k8s_cluster_name"}, false},
			{"a token from a Secret", "prometheus.url=http://prometheus.monitoring:9090,prometheus.auth.secretName=prom,prometheus.auth.bearerTokenKey=token",
				[]string{"--prometheus-url=http://prometheus.monitoring:9090", "--prometheus-bearer-token-file=/etc/retrycap/prometheus/token"}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ps := deployment(t, renderHelm(t, "--set", "proxyImage.tag=v1,"+tc.set)).Spec.Template.Spec
				if want := append(slices.Clone(base), tc.args...); !slices.Equal(ps.Containers[0].Args, want) {
					t.Errorf("args %q, want %q", ps.Containers[0].Args, want)
				}
				var mounted, volume bool
				for _, m := range ps.Containers[0].VolumeMounts {
					mounted = mounted || (m.Name == "prometheus-auth" && m.MountPath == "/etc/retrycap/prometheus" && m.ReadOnly)
				}
				for _, v := range ps.Volumes {
					volume = volume || (v.Name == "prometheus-auth" && v.Secret != nil && v.Secret.SecretName == "prom")
				}
				if mounted != tc.mount || volume != tc.mount {
					t.Errorf("Secret mounted %v, volume %v; want %v", mounted, volume, tc.mount)
				}
			})
		}
	})

	t.Run("the image tags default to the chart's appVersion", func(t *testing.T) {
		var chart struct {
			AppVersion string `json:"appVersion"`
		}
		_, root := helmBinary(t)
		data, err := os.ReadFile(filepath.Join(root, "charts", "retrycap", "Chart.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &chart); err != nil {
			t.Fatal(err)
		}
		c := deployment(t, renderHelm(t)).Spec.Template.Spec.Containers[0]
		if c.Image != "retrycap/manager:"+chart.AppVersion || !slices.Contains(c.Args, "--proxy-image=retrycap/retrycap-proxy:"+chart.AppVersion) {
			t.Errorf("appVersion %s: image %q args %q", chart.AppVersion, c.Image, c.Args)
		}
	})

	t.Run("failure policies, excluded namespaces, another release namespace", func(t *testing.T) {
		out, errOut, err := helmTemplate(t, "platform", "--set", "webhooks.gate.failurePolicy=Ignore,webhooks.injector.failurePolicy=Fail,webhooks.validator.failurePolicy=Ignore",
			"--set", "excludedNamespaces={kube-system,monitoring}")
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, errOut)
		}
		objs := parseObjects(t, "helm template", []byte(out))
		whs, annotations := webhooks(t, objs)
		want := map[string]admissionregistrationv1.FailurePolicyType{
			"gate.retrycap.dev": admissionregistrationv1.Ignore, "inject.retrycap.dev": admissionregistrationv1.Fail, "validate.retrycap.dev": admissionregistrationv1.Ignore,
			"validate-cluster.retrycap.dev": admissionregistrationv1.Ignore,
		}
		if len(whs) != len(want) {
			t.Errorf("webhooks %v", slices.Sorted(maps.Keys(whs)))
		}
		for name, policy := range want {
			w := whs[name]
			if w.policy != policy {
				t.Errorf("%s: failurePolicy %s, want %s", name, w.policy, policy)
			}
			wantSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "monitoring", "platform"},
			}}}
			if name == "validate-cluster.retrycap.dev" {
				// Cluster-scoped objects have no namespace to select by.
				wantSel = nil
			}
			if !reflect.DeepEqual(w.sel, wantSel) {
				t.Errorf("%s: namespaceSelector %+v, want %+v", name, w.sel, wantSel)
			}
			if w.cc.Service == nil || w.cc.Service.Namespace != "platform" || w.cc.Service.Name != "retrycap-webhook-service" {
				t.Errorf("%s: service %+v", name, w.cc.Service)
			}
		}
		if len(annotations) != 2 {
			t.Errorf("webhook configurations %v", slices.Sorted(maps.Keys(annotations)))
		}
		checkCertManagerChain(t, "helm template --namespace platform", objs, "platform")
		for k, u := range objs {
			if u.GetNamespace() != "" && u.GetNamespace() != "platform" {
				t.Errorf("%s in namespace %q", k, u.GetNamespace())
			}
		}
	})

	t.Run("self-signed bootstrap", func(t *testing.T) {
		objs := renderHelm(t, "--set", "certificates.mode=self-signed")
		for _, k := range []string{"Certificate retrycap-serving-cert", "Certificate retrycap-webhook-ca", "Issuer retrycap-ca-issuer", "Issuer retrycap-selfsigned-issuer"} {
			if objs[k] != nil {
				t.Errorf("self-signed renders %s", k)
			}
		}
		var secret corev1.Secret
		objs.get(t, "Secret", "webhook-server-cert", &secret)
		if secret.Namespace != installNamespace || secret.Type != corev1.SecretTypeTLS {
			t.Errorf("Secret in %q of type %q", secret.Namespace, secret.Type)
		}
		caPEM := secret.Data["ca.crt"]
		ca := parseCert(t, "ca.crt", caPEM)
		if !ca.IsCA {
			t.Errorf("ca.crt is not a CA: %+v", ca.Subject)
		}
		leaf := parseCert(t, "tls.crt", secret.Data["tls.crt"])
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		for _, name := range []string{"retrycap-webhook-service.retrycap-system.svc", "retrycap-webhook-service.retrycap-system.svc.cluster.local"} {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("tls.crt for %s: %v", name, err)
			}
		}
		if validity := leaf.NotAfter.Sub(leaf.NotBefore); validity < 3649*24*time.Hour || validity > 3651*24*time.Hour {
			t.Errorf("tls.crt valid for %s, want 3650 days", validity)
		}
		if _, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"]); err != nil {
			t.Errorf("tls.crt and tls.key: %v", err)
		}
		whs, annotations := webhooks(t, objs)
		if len(whs) != 4 {
			t.Errorf("webhooks %v", slices.Sorted(maps.Keys(whs)))
		}
		for name, w := range whs {
			if !bytes.Equal(w.cc.CABundle, caPEM) {
				t.Errorf("%s: caBundle is not the Secret's ca.crt", name)
			}
		}
		for cfg, a := range annotations {
			if len(a) != 0 {
				t.Errorf("%s: annotations %v, want none", cfg, a)
			}
		}
		// The manager mounts that Secret, as with cert-manager.
		spec := deployment(t, objs).Spec.Template.Spec
		if len(spec.Volumes) != 1 || spec.Volumes[0].Secret == nil || spec.Volumes[0].Secret.SecretName != "webhook-server-cert" {
			t.Errorf("volumes %+v", spec.Volumes)
		}
	})

	// A PodDisruptionBudget that keeps every replica refuses every eviction: `kubectl drain` of
	// the node waits forever ("would violate the pod's disruption budget"). One replica gets none;
	// a minAvailable of every replica is refused at render, naming both values.
	t.Run("the PodDisruptionBudget never keeps every replica", func(t *testing.T) {
		const pdb = "PodDisruptionBudget retrycap-controller-manager"
		for _, tc := range []struct {
			set     string
			present bool
		}{{"replicas=2", true}, {"replicas=3,podDisruptionBudget.minAvailable=2", true}, {"replicas=1", false},
			{"replicas=1,podDisruptionBudget.minAvailable=1", false}, {"replicas=2,podDisruptionBudget.enabled=false", false},
			{"replicas=3,podDisruptionBudget.minAvailable=50%", true}} {
			if got := renderHelm(t, "--set", tc.set)[pdb] != nil; got != tc.present {
				t.Errorf("--set %s: PodDisruptionBudget rendered %v, want %v", tc.set, got, tc.present)
			}
		}
		for set, want := range map[string]string{
			"replicas=2,podDisruptionBudget.minAvailable=2": `podDisruptionBudget.minAvailable (2) must be below replicas (2): a budget that keeps every manager pod refuses every eviction, so kubectl drain of their nodes never ends; lower podDisruptionBudget.minAvailable, raise replicas, or set podDisruptionBudget.enabled=false`,
			"replicas=3,podDisruptionBudget.minAvailable=5": `podDisruptionBudget.minAvailable (5) must be below replicas (3): `,
		} {
			out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
			if err == nil || out != "" || !strings.Contains(errOut, want) {
				t.Errorf("--set %s: err %v, stdout %d bytes, stderr %q; want it refused with %q", set, err, len(out), errOut, want)
			}
		}
	})

	t.Run("values outside the schema are refused", func(t *testing.T) {
		for _, set := range []string{"certificates.mode=vault", "webhooks.gate.failurePolicy=Sometimes", "replicas=0", "prometheus.url=prometheus:9090", "prometheus.auth.token=x",
			"prometheus.maxAnswerSize=0", "prometheus.maxAnswerSize=64MB", "prometheus.maxAnswerSize=-1Mi",
			// A replica label the manager refuses at start: not a label name, or given twice.
			"prometheus.replicaLabels={pod-replica}", "prometheus.replicaLabels={replica,replica}",
			"prometheus.clusterLabels={k8s.cluster}", "prometheus.clusterLabels={cluster,cluster}",
			// A key in the wrong place or misspelt was rendered around silently: every object of
			// the chart's values is closed now (Helm's `global` excepted).
			"webhooks.failurePolicy=Ignore", "replica=3", "monitoring.podMonitor.enabled=true", "image.pullpolicy=Always",
			"certificates.selfSigned.validity=30", "podDisruptionBudget.minavailable=2", "crds.keep=yes", "crds.delete=true", "resources.limits.memory=lots",
			"resources.limit.memory=1Gi", "imagePullSecrets[0].nam=regcred",
			// What the manager refuses at start (a crash loop): an interval under 1s, a window
			// not in whole seconds or zero.
			"prometheus.url=http://p:9090,prometheus.interval=500ms", "prometheus.url=http://p:9090,prometheus.window=1500ms",
			"prometheus.url=http://p:9090,prometheus.window=0s", "prometheus.url=http://p:9090,prometheus.interval=0m0s"} {
			out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || out != "" || !strings.Contains(errOut, "values don't meet the specifications of the schema") {
				t.Errorf("--set %s: err %v, stdout %d bytes, stderr %q; want a schema error", set, err, len(out), errOut)
			}
		}
	})

	t.Run("helm lint", func(t *testing.T) {
		helm, root := helmBinary(t)
		// In its own namespace: in default (lint's) the chart refuses, and lint reports the
		// refusal as an [INFO] line and lints nothing it would have rendered.
		cmd := exec.Command(helm, "lint", "--strict", "--namespace", installNamespace, filepath.Join(root, "charts", "retrycap"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(string(out), "Fail:") {
			t.Errorf("helm lint --strict: %v\n%s", err, out)
		}
	})
}

func parseCert(t *testing.T, what string, data []byte) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("%s: not one PEM certificate: %q", what, data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return cert
}

// TestHelmServerSideDryRun applies the chart's output to a real kube-apiserver with
// `kubectl apply --dry-run=server`: every object is validated (schemas, CEL match conditions,
// the CRD, cert-manager's Certificate and Issuer against cert-manager's own CRDs) and none is
// stored.
func TestHelmServerSideDryRun(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := cp.RunKubectl(ctx, stdin, args...)
		if err != nil {
			t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		return out
	}

	// Against a cluster without cert-manager, the default certificates.mode is refused by the
	// chart, naming the way out (Helm's own error said only "ensure CRDs are installed first").
	serverTemplate := func(args ...string) (string, error) {
		helm, root := helmBinary(t)
		cmd := exec.Command(helm, append([]string{"template", helmRelease, filepath.Join(root, "charts", "retrycap"), "--namespace", installNamespace, "--dry-run=server"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	const noCertManager = "certificates.mode is cert-manager (the default), and this cluster has no cert-manager (no CustomResourceDefinition certificates.cert-manager.io): install cert-manager first, or --set certificates.mode=self-signed for the chart's own certificate (docs/helm.md, Certificates)"
	if out, err := serverTemplate(); err == nil || !strings.Contains(out, noCertManager) {
		t.Errorf("helm template --dry-run=server without cert-manager: %v, want the error %q\n%s", err, noCertManager, out)
	}
	if out, err := serverTemplate("--set", "certificates.mode=self-signed"); err != nil {
		t.Errorf("helm template --dry-run=server --set certificates.mode=self-signed without cert-manager: %v\n%s", err, out)
	}

	// cert-manager's CRDs, from its Go module (deploy/crds), so its objects are validated too.
	dir := certManagerCRDs(t)
	kubectl("", "apply", "-f", filepath.Join(dir, "cert-manager.io_certificates.yaml"), "-f", filepath.Join(dir, "cert-manager.io_issuers.yaml"))
	kubectl("", "wait", "--for=condition=Established", "--timeout=60s", "crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io")
	if out, err := serverTemplate(); err != nil {
		t.Errorf("helm template --dry-run=server with cert-manager's CRDs: %v\n%s", err, out)
	}
	// What `helm install` prints after the objects: how to wait for the manager, that the default
	// images must be built and pushed, the first commands. --take-ownership: the control plane
	// installed the CRDs without Helm's labels (a dry run takes nothing).
	helm, root := helmBinary(t)
	for _, tc := range []struct {
		set        string
		wantImages bool
	}{{"replicas=2", true}, {"image.repository=registry.example/rc/manager,proxyImage.repository=registry.example/rc/proxy", false}} {
		cmd := exec.Command(helm, "install", helmRelease, filepath.Join(root, "charts", "retrycap"), "--namespace", installNamespace, "--dry-run=server", "--take-ownership", "--set", tc.set)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		_, notes, _ := strings.Cut(string(out), "\nNOTES:\n")
		if err != nil || !strings.Contains(notes, "  kubectl -n retrycap-system rollout status deployment/retrycap-controller-manager\n") ||
			!strings.Contains(notes, "  kubectl apply -f config/samples/incident18.yaml\n") ||
			strings.Contains(notes, "These images are not published in any registry:\n  retrycap/manager:v0.1.0\n  retrycap/retrycap-proxy:v0.1.0\n") != tc.wantImages {
			t.Errorf("helm install --dry-run=server --take-ownership --set %s: %v %s; NOTES:\n%s", tc.set, err, stderr.String(), notes)
		}
	}
	// Namespaced objects are only dry-run into a namespace that exists: create it for real (the
	// Namespace in the output is then applied over it, dry).
	kubectl("", "create", "namespace", installNamespace)

	for _, variant := range []struct {
		name string
		args []string
	}{
		{"cert-manager (namespace.create=true)", []string{"--set", "namespace.create=true"}},
		{"self-signed bootstrap", []string{"--set", "certificates.mode=self-signed"}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			out, errOut, err := helmTemplate(t, installNamespace, variant.args...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, errOut)
			}
			objs := parseObjects(t, "helm template", []byte(out))
			applied := kubectl(out, "apply", "--dry-run=server", "-f", "-")
			var want []string
			for _, u := range objs {
				gvk := u.GroupVersionKind()
				ref := strings.ToLower(gvk.Kind)
				if gvk.Group != "" {
					ref += "." + gvk.Group
				}
				verb := "created"
				// These two exist already (created above, and by the control plane's CRD install)
				// without kubectl's last-applied annotation: apply patches them.
				if gvk.Kind == "Namespace" || gvk.Kind == "CustomResourceDefinition" {
					verb = "configured"
				}
				want = append(want, ref+"/"+u.GetName()+" "+verb+" (server dry run)")
			}
			sort.Strings(want)
			got := strings.Split(strings.TrimSpace(applied), "\n")
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("kubectl apply --dry-run=server:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}

	// Dry, so nothing was stored.
	if left := kubectl("", "get", "deployments,services,serviceaccounts,secrets,roles,rolebindings,poddisruptionbudgets,certificates,issuers", "-n", installNamespace, "-o", "name"); left != "" {
		t.Errorf("after the dry runs, namespace %s holds %s", installNamespace, left)
	}
	if left := kubectl("", "get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "name"); left != "" {
		t.Errorf("after the dry runs: %s", left)
	}
	if left := kubectl("", "get", "clusterroles,clusterrolebindings", "-l", "app.kubernetes.io/name=retrycap", "-o", "name"); left != "" {
		t.Errorf("after the dry runs: %s", left)
	}
}

// certManagerCRDs returns the deploy/crds directory of cert-manager's module, downloaded into the
// module cache with `go mod download` (checksum-verified) on first use.
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", certManagerModule)
	cmd.Dir = t.TempDir() // outside any module: download only, no go.mod or go.sum touched
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s%s", certManagerModule, err, out, stderr.String())
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s\n%s", certManagerModule, err, mod.Error, out)
	}
	return filepath.Join(mod.Dir, "deploy", "crds")
}
