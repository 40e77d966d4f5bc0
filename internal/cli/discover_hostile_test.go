package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// hostileManifests: a ConfigMap of 10,000 keys whose values look like URLs and are not
// ("http://", "http://:80", "http://[::1", IPv6 literals, userinfo without a scheme, a name of
// 64 characters), one real URL with userinfo among them, a Service named like its namespace,
// and a qualified name over 63 characters in the env.
func hostileManifests(t *testing.T) string {
	t.Helper()
	long := strings.Repeat("a", 64)
	junk := []string{"http://", "http://:80", "http://[::1", "[fe80::1]:80", long + ":80", "http://[::1]:8080", "not a url", "u:p@svc:80"}
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")
	for _, svc := range []string{"shop", "payment"} {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: shop}\nspec:\n  selector: {app: %s}\n  ports: [{name: http, port: 8080}]\n", svc, svc)
	}
	b.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: shop}\ndata:\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "  K%05d: %q\n", i, junk[i%len(junk)])
	}
	b.WriteString("  PAYMENT_URL: \"http://u:p@payment:8080/charge\"\n")
	fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.invalid/web:1
        envFrom: [{configMapRef: {name: big}}]
        env:
        - {name: SHOP_ADDR, value: "shop:8080"}
        - {name: LOOPBACK, value: "http://[::1]:8080"}
        - {name: LONG, value: "http://%s.shop.svc:8080"}
`, long)
	p := filepath.Join(t.TempDir(), "hostile.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiscoverHostileEnvPatchApplies: of the 10,003 values only the two that name a Service
// of the input are edges (the userinfo URL's host, and the Service named like its
// namespace), no junk value becomes an upstream, the credentials in the URL are not echoed, and
// the patch is applied by kubectl patch on a real API server, giving the annotation.
func TestDiscoverHostileEnvPatchApplies(t *testing.T) {
	manifests := hostileManifests(t)
	code, patch, stderr := run(t, "", "discover", "-f", manifests, "-o", "patch")
	if code != 0 {
		t.Fatalf("discover: exit %d: %s", code, stderr)
	}
	const want = `# Deployment shop/web: retrycap.dev/upstreams "payment, shop", one try each (add =N where the app retries)
#   payment: env PAYMENT_URL (container web, ConfigMap big key PAYMENT_URL)
#   shop: env SHOP_ADDR (container web)
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  template:
    metadata:
      annotations:
        retrycap.dev/upstreams: payment, shop
`
	if patch != want {
		t.Fatalf("patch:\n%s\nwant:\n%s", patch, want)
	}
	if strings.Contains(patch+stderr, "u:p") {
		t.Fatalf("the URL's credentials are echoed:\n%s\n%s", patch, stderr)
	}
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp, ctx := startControlPlane(t, 2*time.Minute)
	// create, not apply: apply keeps a copy of the 10,000 keys in an annotation, over 256 KiB.
	if _, stderr, err := cp.RunKubectl(ctx, "", "create", "-f", manifests); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	js, err := yaml.YAMLToJSON([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := cp.RunKubectl(ctx, "", "patch", "deployment", "web", "-n", "shop", "--type", "merge", "-p", string(js)); err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, stderr)
	}
	got, stderr, err := cp.RunKubectl(ctx, "", "get", "deployment", "web", "-n", "shop", "-o", `jsonpath={.spec.template.metadata.annotations.retrycap\.dev/upstreams}`)
	if err != nil || got != "payment, shop" {
		t.Fatalf("annotation after the patch %q (%v)\n%s", got, err, stderr)
	}
}
