package v1alpha1_test

import (
	"strings"
	"testing"
)

// GitOps tools apply with server-side apply (Flux always, Argo CD with ServerSideApply=true).
// retryOn and methods have defaults, which no field manager owns: as sets, a list applied later
// was merged into the defaults, so `methods: [GET]` left PUT and DELETE retried and
// `retryOn: ["504"]` kept the five others, in silence. As atomic lists, the applier owns the
// list it writes and the defaults are replaced; removing the list from the manifest brings the
// defaults back.
func TestServerSideApplyReplacesDefaultedLists(t *testing.T) {
	const head = "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: ssa-defaults, namespace: default}\nspec:\n  maxAmplification: 3\n"
	apply := func(manifest string) {
		t.Helper()
		out, stderr, err := cp.RunKubectl(ctx(t), manifest, "apply", "--server-side", "--field-manager=flux", "-f", "-")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if out != "retrypolicy.retrycap.dev/ssa-defaults serverside-applied\n" {
			t.Fatalf("kubectl apply --server-side: %q", out)
		}
	}
	lists := func() string {
		t.Helper()
		out, stderr, err := cp.RunKubectl(ctx(t), "", "get", "rp", "-n", "default", "ssa-defaults", "-o", `jsonpath={.spec.retry.retryOn} {.spec.retry.methods}`)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		return out
	}
	const defaults = `["connect-failure","reset","502","503","504","unavailable"] ["GET","HEAD","OPTIONS","PUT","DELETE"]`
	apply(head)
	if got := lists(); got != defaults {
		t.Fatalf("created without lists: %s, want the defaults %s", got, defaults)
	}
	apply(head + "  retry: {retryOn: [\"504\"], methods: [GET]}\n")
	if got, want := lists(), `["504"] ["GET"]`; got != want {
		t.Errorf("applied retryOn [504], methods [GET]: %s, want %s", got, want)
	}
	apply(head)
	if got := lists(); got != defaults {
		t.Errorf("applied without the lists again: %s, want the defaults %s", got, defaults)
	}

	// A second manager writing the list is a conflict to resolve, not a union of two teams' lists.
	apply(head + "  retry: {retryOn: [\"503\"]}\n")
	_, stderr, err := cp.RunKubectl(ctx(t), head+"  retry: {retryOn: [\"504\"]}\n", "apply", "--server-side", "--field-manager=team-b", "-f", "-")
	if err == nil || !strings.HasPrefix(stderr, "error: Apply failed with 1 conflict: conflict with \"flux\": .spec.retry.retryOn\n") {
		t.Errorf("a second manager's retryOn: err %v, stderr %q", err, stderr)
	}
}

// `accessLog: Off` unquoted is YAML 1.1's false to kubectl (and Helm): refused, naming the field,
// the value kubectl sent and the values it takes, never stored as something else; quoted it is
// stored as written. docs/api.md says to quote it.
func TestBareOffIsRefusedNamingTheField(t *testing.T) {
	const head = "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: bare-off, namespace: default}\nspec:\n  maxAmplification: 3\n  observability: {accessLog: "
	_, stderr, err := cp.RunKubectl(ctx(t), head+"Off}\n", "apply", "-f", "-")
	if err == nil || !strings.Contains(stderr, "* spec.observability.accessLog: Unsupported value: false: supported values: \"Off\", \"Stdout\"\n") {
		t.Errorf("accessLog: Off (bare): err %v, stderr %q", err, stderr)
	}
	out, stderr, err := cp.RunKubectl(ctx(t), head+"\"Off\"}\n", "apply", "-f", "-", "-o", "jsonpath={.spec.observability.accessLog}")
	if err != nil || out != "Off" {
		t.Errorf("accessLog: \"Off\": %q, %v\n%s", out, err, stderr)
	}
}
