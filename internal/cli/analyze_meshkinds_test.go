package cli

import (
	"os"
	"strings"
	"testing"
)

// A misspelt kind of a mesh API group the graph reads, as the user runs analyze and discover on
// it: both exit 2 naming the object, the apiVersion and the kind, with the kind meant (before:
// analyze counted "ignored: HTTPRout 1, VirtualServic 1" and gave 9 > cap 6 with Istio's default
// for api and the fix "api=2"; discover said nothing of them). Spelt right, the same routes give
// 90 > cap 6: the retries the misspelling hid.
func TestMeshKindsMisspelt(t *testing.T) {
	const file = "testdata/hostile/mesh-kinds.yaml"
	errs := "error: " + file + `: document 3: HTTPRout shop/web: kind "HTTPRout": gateway.networking.k8s.io/v1 has no such kind (the API server refuses it: no matches for kind "HTTPRout" in version "gateway.networking.k8s.io/v1"); did you mean HTTPRoute?
error: ` + file + `: document 4: VirtualServic shop/api: kind "VirtualServic": networking.istio.io/v1 has no such kind (the API server refuses it: no matches for kind "VirtualServic" in version "networking.istio.io/v1"); did you mean VirtualService?
`
	data := misspeltKindsRefused(t, file, errs)
	fixed := strings.NewReplacer("kind: HTTPRout\n", "kind: HTTPRoute\n", "kind: VirtualServic\n", "kind: VirtualService\n").Replace(string(data))
	code, out, stderr := run(t, fixed, "analyze", "-f", "-")
	for _, s := range []string{
		"read: 1 file(s), 10 object(s): 2 workload(s) (1 declare retrycap.dev/upstreams), 2 Service(s), 1 Namespace(s), 1 RetryPolicy(ies); mesh objects: DestinationRule 1, HTTPRoute 1, VirtualService 1; ignored: ReferenceGrant 1",
		"RetryPolicy shop/shop  cap 6  amplification 90  WITHIN CAP: no",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("spelt right: stdout lacks %q\n%s", s, out)
		}
	}
	if code != ExitOverCap {
		t.Errorf("spelt right: exit %d, want %d\nstderr:\n%s", code, ExitOverCap, stderr)
	}
}

// Linkerd's misspelt kinds, as the user runs analyze and discover: exit 2 naming the file, the
// object and the kind, with the kind meant (before: "ignored: HTTPRout 1, ServiceProfil 1" and
// 3 <= cap 6, a pass, the route's retry.linkerd.io/limit "4" not counted). Spelt right, the
// same manifests give 15 > cap 6 and the ServiceProfile's warning; policy.linkerd.io Server, a
// kind the graph does not read, stays ignored.
func TestLinkerdKindsMisspelt(t *testing.T) {
	const file = "testdata/hostile/linkerd-kinds.yaml"
	errs := "error: " + file + `: document 3: HTTPRout shop/api: kind "HTTPRout": policy.linkerd.io/v1beta3 has no such kind (the API server refuses it: no matches for kind "HTTPRout" in version "policy.linkerd.io/v1beta3"); did you mean HTTPRoute?
error: ` + file + `: document 4: ServiceProfil shop/stock.shop.svc.cluster.local: kind "ServiceProfil": linkerd.io/v1alpha2 has no such kind (the API server refuses it: no matches for kind "ServiceProfil" in version "linkerd.io/v1alpha2"); did you mean ServiceProfile?
`
	data := misspeltKindsRefused(t, file, errs)
	fixed := strings.NewReplacer("kind: HTTPRout\n", "kind: HTTPRoute\n", "kind: ServiceProfil\n", "kind: ServiceProfile\n").Replace(string(data))
	code, out, stderr := run(t, fixed, "analyze", "-f", "-")
	for _, s := range []string{
		"read: 1 file(s), 11 object(s): 3 workload(s) (1 declare retrycap.dev/upstreams), 3 Service(s), 1 Namespace(s), 1 RetryPolicy(ies); mesh objects: HTTPRoute 1, ServiceProfile 1; ignored: Server 1",
		"RetryPolicy shop/shop  cap 6  amplification 15  WITHIN CAP: no",
		`frontend -x15-> api: 15 = 3 (Deployment frontend) x 5 (HTTPRoute shop/api metadata.annotations["retry.linkerd.io/limit"]: "4")`,
		"warning: Linkerd ServiceProfile shop/stock.shop.svc.cluster.local for stock: Linkerd ignores the retry.linkerd.io annotations and retries under the profile's budget: budget-bounded retries not counted",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("spelt right: stdout lacks %q\n%s", s, out)
		}
	}
	if code != ExitOverCap {
		t.Errorf("spelt right: exit %d, want %d\nstderr:\n%s", code, ExitOverCap, stderr)
	}
}

// misspeltKindsRefused runs analyze and discover on file as a user does and checks both exit 2
// with errs (the misspelt kinds' errors) and nothing on stdout; it returns the file's bytes, for
// the same manifests spelt right.
func misspeltKindsRefused(t *testing.T, file, errs string) []byte {
	t.Helper()
	for _, cmd := range []string{"analyze", "discover"} {
		code, out, stderr := run(t, "", cmd, "-f", file)
		want := errs + "retrycap: " + cmd + ": 2 error(s) in the input\n"
		if code != ExitBadInput || out != "" || stderr != want {
			t.Errorf("%s: exit %d, stdout %q\nstderr:\n%s\nwant exit %d and\n%s", cmd, code, out, stderr, ExitBadInput, want)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
