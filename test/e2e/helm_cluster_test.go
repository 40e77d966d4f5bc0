package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/retrycap/retrycap/internal/controlplane"
)

// TestHelmAgainstTheAPIServer installs, refuses, uninstalls and reinstalls the chart as a platform
// engineer would, with the real helm against a real kube-apiserver (no pods run: what is checked
// is what the API server stores and refuses):
//   - an API server older than 1.29 (a proxy rewriting /version) is refused, naming the version:
//     the injector's native sidecar would be dropped there, and every injected pod would hang;
//   - a priorityClassName the cluster lacks is refused (every manager pod would be forbidden);
//   - a second release in another namespace is refused by Helm before it creates anything;
//   - a release name a Service cannot carry is refused before anything is created;
//   - the manager's pod passes the Pod Security Standard restricted;
//   - helm uninstall leaves no cluster-scoped object but the two CRDs (crds.keep), and a
//     reinstall in another namespace needs --take-ownership for them, as docs/helm.md says.
func TestHelmAgainstTheAPIServer(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	// Ten minutes for all of it (about 15 s alone): one CI run spent about 300 s before its third
	// step with the steps before it passing; each helm and kubectl call over 20 s is logged with
	// its time, so that the next such run says which one it was.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		start := time.Now()
		out, errOut, err := cp.RunKubectl(ctx, stdin, args...)
		if d := time.Since(start); d > 20*time.Second {
			t.Logf("slow: kubectl %s took %s", strings.Join(args, " "), d.Round(time.Millisecond))
		}
		if err != nil {
			t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		return out
	}
	helm, root := helmBinary(t)
	chart := filepath.Join(root, "charts", "retrycap")
	runHelm := func(kubeconfig string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, helm, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if d := time.Since(start); d > 20*time.Second {
			t.Logf("slow: helm %s took %s", strings.Join(args, " "), d.Round(time.Millisecond))
		}
		return string(out), err
	}
	// The control plane installs the CRDs without Helm's ownership: remove them, a fresh cluster.
	kubectl("", "delete", "crd", "retrypolicies.retrycap.dev", "clusterretrypolicies.retrycap.dev")

	t.Run("an API server older than 1.29 is refused", func(t *testing.T) {
		for version, want := range map[string]string{
			"v1.28.9": "Kubernetes 1.28+: retrycap needs 1.29 or later (the injector adds the proxy as a native sidecar, an init container with restartPolicy: Always; this API server drops the field, and every injected pod would wait forever on an init container that never exits)",
			"v1.29.0": "",
		} {
			kubeconfig := versionProxy(t, cp.Config, version)
			out, err := runHelm(kubeconfig, "install", helmRelease, chart, "-n", "rc-a", "--create-namespace", "--dry-run=server", "--set", "certificates.mode=self-signed")
			if want == "" && err != nil {
				t.Errorf("helm install --dry-run=server on %s: %v\n%s", version, err, out)
			}
			if want != "" && (err == nil || !strings.Contains(out, want)) {
				t.Errorf("helm install --dry-run=server on %s: %v, want the error %q\n%s", version, err, want, out)
			}
		}
	})

	t.Run("a priorityClassName the cluster lacks is refused", func(t *testing.T) {
		const want = `priorityClassName "system-critical": this cluster has no PriorityClass of that name (kubectl get priorityclasses), and the API server would refuse every manager pod naming it; create it first or choose another`
		out, err := runHelm(cp.Kubeconfig, "install", helmRelease, chart, "-n", "rc-a", "--create-namespace", "--dry-run=server", "--set", "certificates.mode=self-signed,priorityClassName=system-critical")
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("helm install --set priorityClassName=system-critical: %v, want the error %q\n%s", err, want, out)
		}
	})

	// Helm's own error named only the kind: `no matches for kind "PodMonitor" in version
	// "monitoring.coreos.com/v1" ensure CRDs are installed first`.
	t.Run("a monitoring object whose CRD the cluster lacks is refused naming the value", func(t *testing.T) {
		for value, crd := range map[string]string{"podMonitors": "podmonitors.monitoring.coreos.com", "prometheusRule": "prometheusrules.monitoring.coreos.com"} {
			want := "monitoring." + value + ".enabled is true, and this cluster has no CustomResourceDefinition " + crd + " (the Prometheus Operator's): install the Prometheus Operator first, or leave monitoring." + value + ".enabled false"
			out, err := runHelm(cp.Kubeconfig, "install", helmRelease, chart, "-n", "rc-a", "--create-namespace", "--dry-run=server", "--set", "certificates.mode=self-signed,monitoring."+value+".enabled=true")
			if err == nil || !strings.Contains(out, want) {
				t.Errorf("helm install --set monitoring.%s.enabled=true: %v, want the error %q\n%s", value, err, want, out)
			}
		}
	})

	if out, err := runHelm(cp.Kubeconfig, "install", helmRelease, chart, "-n", "rc-a", "--create-namespace", "--set", "certificates.mode=self-signed,priorityClassName=system-cluster-critical"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	clusterScoped := func() []string {
		var names []string
		for _, n := range strings.Fields(kubectl("", "get", "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations,customresourcedefinitions", "-o", "name")) {
			if strings.Contains(n, "retrycap") || strings.Contains(n, "my.rel") {
				names = append(names, n)
			}
		}
		return names
	}
	installed := clusterScoped()

	t.Run("a second release in another namespace is refused before anything is created", func(t *testing.T) {
		const want = `Error: INSTALLATION FAILED: Unable to continue with install: CustomResourceDefinition "retrypolicies.retrycap.dev" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-namespace" must equal "rc-b": current value is "rc-a"`
		out, err := runHelm(cp.Kubeconfig, "install", helmRelease, chart, "-n", "rc-b", "--create-namespace", "--set", "certificates.mode=self-signed")
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("second helm install in rc-b: %v, want %q\n%s", err, want, out)
		}
		if _, _, err := cp.RunKubectl(ctx, "", "get", "namespace", "rc-b"); err == nil {
			t.Errorf("the refused install created namespace rc-b")
		}
	})

	t.Run("a release name a Service cannot carry is refused before anything is created", func(t *testing.T) {
		out, err := runHelm(cp.Kubeconfig, "install", "my.rel", chart, "-n", "rc-a", "--take-ownership", "--set", "certificates.mode=self-signed")
		if want := `release name "my.rel": the chart names its objects after it`; err == nil || !strings.Contains(out, want) {
			t.Errorf("helm install my.rel: %v, want %q\n%s", err, want, out)
		}
		if got := clusterScoped(); !slices.Equal(got, installed) {
			t.Errorf("after the refused install of my.rel: %q, want %q", got, installed)
		}
		if out, _ := runHelm(cp.Kubeconfig, "list", "-A", "-a", "-q"); out != "retrycap\n" {
			t.Errorf("helm list -A -a: %q, want only retrycap", out)
		}
	})

	t.Run("the manager's pod passes the Pod Security Standard restricted", func(t *testing.T) {
		kubectl("", "create", "namespace", "psa-restricted")
		kubectl("", "label", "namespace", "psa-restricted", "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
		spec := kubectl("", "get", "deployment", "retrycap-controller-manager", "-n", "rc-a", "-o", "jsonpath={.spec.template.spec}")
		pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"manager","namespace":"psa-restricted"},"spec":%s}`, spec)
		out, errOut, err := cp.RunKubectl(ctx, pod, "create", "--dry-run=server", "-f", "-")
		if err != nil || out != "pod/manager created (server dry run)\n" || errOut != "" {
			t.Errorf("the manager's pod in a restricted namespace: %v\n%s%s", err, out, errOut)
		}
	})

	if out, err := runHelm(cp.Kubeconfig, "uninstall", helmRelease, "-n", "rc-a"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if got, want := clusterScoped(), []string{"customresourcedefinition.apiextensions.k8s.io/clusterretrypolicies.retrycap.dev", "customresourcedefinition.apiextensions.k8s.io/retrypolicies.retrycap.dev"}; !slices.Equal(got, want) {
		t.Errorf("after helm uninstall: %q, want the two CRDs only (crds.keep)", got)
	}
	if left := kubectl("", "get", "deployments,services,serviceaccounts,secrets,roles,rolebindings,poddisruptionbudgets", "-n", "rc-a", "-o", "name"); strings.TrimPrefix(left, "serviceaccount/default\n") != "" {
		t.Errorf("after helm uninstall, rc-a holds %q", left)
	}

	// (No kube-controller-manager here: "default" exists only where one runs.)
	// The kept CRDs still name rc-a: a reinstall elsewhere is refused until it takes them over.
	const refusedElsewhere = `CustomResourceDefinition "retrypolicies.retrycap.dev" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-namespace" must equal "rc-b": current value is "rc-a"`
	if out, err := runHelm(cp.Kubeconfig, "install", helmRelease, chart, "-n", "rc-b", "--create-namespace", "--set", "certificates.mode=self-signed"); err == nil || !strings.Contains(out, refusedElsewhere) {
		t.Errorf("reinstall in rc-b: %v, want %q\n%s", err, refusedElsewhere, out)
	}
	if out, err := runHelm(cp.Kubeconfig, "install", helmRelease, chart, "-n", "rc-b", "--create-namespace", "--take-ownership", "--set", "certificates.mode=self-signed"); err != nil {
		t.Fatalf("reinstall in rc-b --take-ownership: %v\n%s", err, out)
	}
	if got := kubectl("", "get", "crd", "retrypolicies.retrycap.dev", "clusterretrypolicies.retrycap.dev", "-o", `jsonpath={.items[*].metadata.annotations.meta\.helm\.sh/release-namespace}`); got != "rc-b rc-b" {
		t.Errorf("after the reinstall with --take-ownership the CRDs belong to %q, want rc-b", got)
	}

	// certificates.mode=self-signed read back any Secret webhook-server-cert with the three keys:
	// one cert-manager wrote (a switch from cert-manager mode, or a namespace reused), 90 days
	// and never renewed in this mode, or for other names. Only the chart's own is reused now.
	if out, err := runHelm(cp.Kubeconfig, "uninstall", helmRelease, "-n", "rc-b"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	kubectl("", "create", "namespace", "rc-c")
	foreignCert, foreignKey := foreignPair(t)
	kubectl(fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/tls","metadata":{"name":"webhook-server-cert","namespace":"rc-c",
		"annotations":{"cert-manager.io/certificate-name":"retrycap-serving-cert","cert-manager.io/issuer-name":"retrycap-selfsigned-issuer"}},
		"data":{"ca.crt":%q,"tls.crt":%q,"tls.key":%q}}`, foreignCert, foreignCert, foreignKey), "create", "-f", "-")
	if out, err := runHelm(cp.Kubeconfig, "install", helmRelease, chart, "-n", "rc-c", "--take-ownership", "--set", "certificates.mode=self-signed"); err != nil {
		t.Fatalf("helm install in rc-c over cert-manager's Secret: %v\n%s", err, out)
	}
	crt := kubectl("", "get", "secret", "webhook-server-cert", "-n", "rc-c", "-o", `jsonpath={.data.tls\.crt}`)
	caBundle := kubectl("", "get", "mutatingwebhookconfiguration", "retrycap-mutating-webhook-configuration", "-o", `jsonpath={.webhooks[0].clientConfig.caBundle}`)
	if crt == foreignCert {
		t.Errorf("self-signed mode reused cert-manager's certificate (CN=foreign, 90 days, never renewed here)")
	}
	verifyServing(t, crt, caBundle, "retrycap-webhook-service.rc-c.svc")

	// docs/helm.md's upgrade command, run with a newer chart whose default changed (a copy with
	// webhooks.timeoutSeconds 7): the new default must apply, and the value set at install must
	// stay. The page said --reuse-values, which reuses the old chart's defaults too: 5 stayed, and
	// a value a newer chart requires would be missing.
	t.Run("the documented helm upgrade takes the new chart's defaults and keeps the values set", func(t *testing.T) {
		if out, err := runHelm(cp.Kubeconfig, "upgrade", helmRelease, chart, "-n", "rc-c", "--reuse-values", "--set", "replicas=3"); err != nil {
			t.Fatalf("helm upgrade --set replicas=3: %v\n%s", err, out)
		}
		page, err := os.ReadFile(filepath.Join(root, "docs", "helm.md"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile("`helm upgrade retrycap charts/retrycap -n retrycap-system ([^`]*)`").FindSubmatch(page)
		if m == nil {
			t.Fatal("docs/helm.md has no `helm upgrade retrycap charts/retrycap -n retrycap-system ...`")
		}
		newer := copyChart(t, chart)
		values := filepath.Join(newer, "values.yaml")
		data, err := os.ReadFile(values)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "\n  timeoutSeconds: 5\n") {
			t.Fatal("values.yaml: no webhooks.timeoutSeconds: 5 to change")
		}
		if err := os.WriteFile(values, []byte(strings.Replace(string(data), "\n  timeoutSeconds: 5\n", "\n  timeoutSeconds: 7\n", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"upgrade", helmRelease, newer, "-n", "rc-c"}, strings.Fields(string(m[1]))...)
		if out, err := runHelm(cp.Kubeconfig, args...); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		got := kubectl("", "get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", `jsonpath={.items[*].webhooks[*].timeoutSeconds}`) +
			kubectl("", "get", "deployment", "retrycap-controller-manager", "-n", "rc-c", "-o", "jsonpath=, replicas {.spec.replicas}")
		if want := "7 7 7 7, replicas 3"; got != want {
			t.Errorf("after docs/helm.md's `helm upgrade ... %s` with a chart whose default timeout is 7: timeouts %q, want %q", m[1], got, want)
		}
	})
}

// copyChart copies the chart into a temporary directory, the links in files/ resolved.
func copyChart(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "retrycap")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p) // follows a link
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
	return dst
}

// foreignPair is a key pair as cert-manager's self-signed Issuer writes it: a 90-day certificate
// that is its own CA, here for a name that is not the webhook Service's. Both base64 (Secret data).
func foreignPair(t *testing.T) (certB64, keyB64 string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "foreign"}, DNSNames: []string{"foreign"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return b64("CERTIFICATE", der), b64("EC PRIVATE KEY", keyDER)
}

// verifyServing fails the test unless the base64 serving certificate verifies for dnsName under
// the base64 CA bundle, as the API server verifies the webhook server.
func verifyServing(t *testing.T, crtB64, caB64, dnsName string) {
	t.Helper()
	crtPEM, err := base64.StdEncoding.DecodeString(crtB64)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("caBundle holds no certificate: %q", caPEM)
	}
	leaf := parseCert(t, "tls.crt", crtPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the Secret's tls.crt (CN %s) under the webhooks' caBundle for %s: %v", leaf.Subject.CommonName, dnsName, err)
	}
}

// versionProxy serves the control plane's API through a plain-HTTP proxy that answers /version
// with gitVersion, and returns a kubeconfig for it: an API server of another Kubernetes version
// as far as Helm's capabilities go.
func versionProxy(t *testing.T, cfg *rest.Config, gitVersion string) string {
	t.Helper()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if target.Scheme == "" {
		target = &url.URL{Scheme: "https", Host: cfg.Host}
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: transport,
	}
	// A provider's minor carries a "+" (GKE, EKS: "28+").
	minor := strings.Split(gitVersion, ".")[1] + "+"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"major":"1","minor":%q,"gitVersion":%q,"platform":"linux/amd64"}`, minor, gitVersion)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster: {server: %q}\nusers:\n- name: proxy\n  user: {}\ncontexts:\n- name: proxy\n  context: {cluster: proxy, user: proxy}\ncurrent-context: proxy\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
