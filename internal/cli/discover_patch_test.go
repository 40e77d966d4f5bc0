package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestDiscoverPatchAppliedThenAnalysed: discover's patches for microservices-demo, applied with
// kubectl patch to its Deployments on a real API server, give workloads that analyze reads into
// the graph the env names, every edge declared with one try.
func TestDiscoverPatchAppliedThenAnalysed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	manifests := "testdata/discover/public/microservices-demo/kubernetes-manifests.yaml"
	code, patches, stderr := run(t, "", "discover", "-f", manifests, "-o", "patch")
	if code != 0 {
		t.Fatalf("discover: exit %d: %s", code, stderr)
	}
	cp, ctx := startControlPlane(t, 2*time.Minute)
	if _, stderr, err := cp.RunKubectl(ctx, "", "apply", "-f", manifests); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	n := 0
	for _, doc := range strings.Split(patches, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name, Namespace string }
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if err := yaml.Unmarshal(js, &obj); err != nil || obj.Kind == "" {
			t.Fatalf("not an object (%v):\n%s", err, doc)
		}
		if _, stderr, err := cp.RunKubectl(ctx, "", "patch", strings.ToLower(obj.Kind), obj.Metadata.Name, "-n", obj.Metadata.Namespace, "--type", "merge", "-p", string(js)); err != nil {
			t.Fatalf("kubectl patch %s %s: %v\n%s", obj.Kind, obj.Metadata.Name, err, stderr)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("%d patches, want 4 (checkoutservice, frontend, loadgenerator, recommendationservice)", n)
	}
	live, stderr, err := cp.RunKubectl(ctx, "", "get", "deployments,services", "-n", "default", "-o", "yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	dir := t.TempDir()
	policy := "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: boutique, namespace: default}\nspec: {maxAmplification: 4}\n"
	if err := os.WriteFile(filepath.Join(dir, "live.yaml"), []byte(live), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "", "analyze", "-f", dir, "-o", "tree")
	if code != 0 {
		t.Fatalf("analyze: exit %d\n%s\n%s", code, out, stderr)
	}
	// The env's 15 HTTP edges, one try each: frontend reached through both its Services
	// (frontend, frontend-external); cartservice's Redis is no HTTP edge, so redis-cart is a
	// node nothing declares a call to.
	const want = `read: 2 file(s), 26 object(s): 12 workload(s) (4 declare retrycap.dev/upstreams), 13 Service(s), 1 RetryPolicy(ies)

RetryPolicy default/boutique  cap 4  amplification 1  (* worst path)
frontend-external (client x1) *
├─ -x1-> adservice *
├─ -x1-> cartservice
├─ -x1-> checkoutservice
│  ├─ -x1-> cartservice
│  ├─ -x1-> currencyservice
│  ├─ -x1-> emailservice
│  ├─ -x1-> paymentservice
│  ├─ -x1-> productcatalogservice
│  └─ -x1-> shippingservice
├─ -x1-> currencyservice
├─ -x1-> productcatalogservice
├─ -x1-> recommendationservice
│  └─ -x1-> productcatalogservice
└─ -x1-> shippingservice
loadgenerator (client x1)
└─ -x1-> frontend
   ├─ -x1-> adservice
   ├─ -x1-> cartservice
   ├─ -x1-> checkoutservice (see above)
   ├─ -x1-> currencyservice
   ├─ -x1-> productcatalogservice
   ├─ -x1-> recommendationservice (see above)
   └─ -x1-> shippingservice
redis-cart (client x1)
`
	if out != want {
		t.Errorf("analyze:\n%s\nwant:\n%s", out, want)
	}
}
