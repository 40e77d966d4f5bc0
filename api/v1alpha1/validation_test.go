package v1alpha1_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/scheme"
)

// These tests run the CRD in a real kube-apiserver: the bounds, enums, defaults and CEL rules are
// the API server's to enforce, so only the API server can show they work.

var (
	cp  *controlplane.ControlPlane
	cli client.Client
)

func TestMain(m *testing.M) {
	var err error
	cp, err = controlplane.Start(controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cli, err = client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = cp.Stop()
		os.Exit(1)
	}
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func policy(t *testing.T, name, specYAML string) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{}
	if err := yaml.Unmarshal([]byte(specYAML), &spec); err != nil {
		t.Fatalf("spec of %s: %v", name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "retrycap.dev/v1alpha1",
		"kind":       "RetryPolicy",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       spec,
	}}
	return u
}

func TestSamplesAreAccepted(t *testing.T) {
	out, stderr, err := cp.RunKubectl(ctx(t), "", "apply", "-k", filepath.Join(cp.RepoRoot, "config", "samples"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{
		"namespace/payments created", "namespace/shop created",
		"namespace/storefront created", "namespace/fulfilment created", "namespace/billing created",
		"deployment.apps/gateway created", "deployment.apps/catalog created", "deployment.apps/db created",
		"deployment.apps/frontend created", "deployment.apps/checkout created", "deployment.apps/billing created", "deployment.apps/payment created",
		"deployment.apps/web created", "deployment.apps/order created",
		"retrypolicy.retrycap.dev/checkout created", "retrypolicy.retrycap.dev/storm created",
		"clusterretrypolicy.retrycap.dev/checkout-chain created",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("kubectl apply -k config/samples: missing %q in:\n%s", want, out)
		}
	}
	var p v1alpha1.RetryPolicy
	if err := cli.Get(ctx(t), types.NamespacedName{Namespace: "shop", Name: "checkout"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.MaxAmplification != 3 || len(p.Spec.Entrypoints) != 1 || p.Spec.Entrypoints[0].ClientAttempts != 2 {
		t.Errorf("shop/checkout read back as %+v", p.Spec)
	}
	var cp v1alpha1.ClusterRetryPolicy
	if err := cli.Get(ctx(t), types.NamespacedName{Name: "checkout-chain"}, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Spec.MaxAmplification != 4 || cp.Spec.NamespaceSelector.MatchLabels["retrycap.dev/chain"] != "checkout" || len(cp.Spec.Entrypoints) != 1 || cp.Spec.Entrypoints[0].Service != "web.storefront" {
		t.Errorf("checkout-chain read back as %+v", cp.Spec)
	}
}

func TestDefaultsAreApplied(t *testing.T) {
	u := policy(t, "defaults", `{maxAmplification: 4, entrypoints: [{service: gateway}]}`)
	if err := cli.Create(ctx(t), u); err != nil {
		t.Fatal(err)
	}
	var p v1alpha1.RetryPolicy
	if err := cli.Get(ctx(t), client.ObjectKeyFromObject(u), &p); err != nil {
		t.Fatal(err)
	}
	s := p.Spec
	check := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("enforcement", s.Enforcement, "Reject")
	check("entrypoints[0].clientAttempts", s.Entrypoints[0].ClientAttempts, 1)
	check("retry.defaultAttempts", s.Retry.DefaultAttempts, 1)
	check("retry.perTryTimeout", s.Retry.PerTryTimeout.Duration, 2*time.Second)
	check("retry.backoff.base", s.Retry.Backoff.Base.Duration, 100*time.Millisecond)
	check("retry.backoff.max", s.Retry.Backoff.Max.Duration, 2*time.Second)
	check("retry.retryOn", s.Retry.RetryOn, []string{"connect-failure", "reset", "502", "503", "504", "unavailable"})
	check("retry.methods", s.Retry.Methods, []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
	check("budget.retryPercent", *s.Budget.RetryPercent, 20)
	check("budget.minRetriesPerSecond", *s.Budget.MinRetriesPerSecond, 10)
	check("budget.window", s.Budget.Window.Duration, 10*time.Second)
	check("circuitBreaker.failures", s.CircuitBreaker.Failures, 50)
	check("circuitBreaker.window", s.CircuitBreaker.Window.Duration, 30*time.Second)
	check("circuitBreaker.openFor", s.CircuitBreaker.OpenFor.Duration, 10*time.Second)
	check("injection.enabled", *s.Injection.Enabled, true)
}

func TestInvalidPoliciesAreRefusedByTheAPIServer(t *testing.T) {
	cases := []struct {
		name, spec string
		field      string
		reason     metav1.CauseType
		message    string // a regexp the cause's message must match
	}{
		{"cap-zero", `{maxAmplification: 0}`, "spec.maxAmplification", metav1.CauseTypeFieldValueInvalid, `should be greater than or equal to 1`},
		{"cap-too-big", `{maxAmplification: 1001}`, "spec.maxAmplification", metav1.CauseTypeFieldValueInvalid, `should be less than or equal to 1000`},
		{"cap-missing", `{enforcement: Audit}`, "spec.maxAmplification", metav1.CauseTypeFieldValueRequired, `Required value`},
		{"bad-mode", `{maxAmplification: 4, enforcement: Block}`, "spec.enforcement", metav1.CauseTypeFieldValueNotSupported, `supported values: "Reject", "Rewrite", "Audit"`},
		{"dup-entry", `{maxAmplification: 4, entrypoints: [{service: gateway}, {service: gateway, clientAttempts: 2}]}`, "spec.entrypoints[1]", metav1.CauseTypeFieldValueDuplicate, `Duplicate value`},
		{"bad-entry-name", `{maxAmplification: 4, entrypoints: [{service: Gateway_1}]}`, "spec.entrypoints[0].service", metav1.CauseTypeFieldValueInvalid, `should match`},
		{"client-zero", `{maxAmplification: 4, entrypoints: [{service: gateway, clientAttempts: 0}]}`, "spec.entrypoints[0].clientAttempts", metav1.CauseTypeFieldValueInvalid, `greater than or equal to 1`},
		{"attempts-101", `{maxAmplification: 4, retry: {defaultAttempts: 101}}`, "spec.retry.defaultAttempts", metav1.CauseTypeFieldValueInvalid, `less than or equal to 100`},
		{"timeout-zero", `{maxAmplification: 4, retry: {perTryTimeout: 0s}}`, "spec.retry.perTryTimeout", metav1.CauseTypeFieldValueInvalid, `must be between 1ms and`},
		{"timeout-comma", `{maxAmplification: 4, retry: {perTryTimeout: "1,5s"}}`, "spec.retry.perTryTimeout", metav1.CauseTypeFieldValueInvalid, `should match`},
		{"max-time-zero", `{maxAmplification: 4, maxTimeToAnswer: 0s}`, "spec.maxTimeToAnswer", metav1.CauseTypeFieldValueInvalid, `must be between 1ms and`},
		{"max-time-exponent", `{maxAmplification: 4, maxTimeToAnswer: 2.5e3s}`, "spec.maxTimeToAnswer", metav1.CauseTypeFieldValueInvalid, `should match`},
		{"backoff-inverted", `{maxAmplification: 4, retry: {backoff: {base: 5s, max: 1s}}}`, "spec.retry.backoff.base", metav1.CauseTypeFieldValueInvalid, `base must not exceed max`},
		{"retry-on-unknown", `{maxAmplification: 4, retry: {retryOn: [503, "5xx"]}}`, "spec.retry.retryOn[1]", metav1.CauseTypeFieldValueInvalid, `should match`},
		{"retry-on-grpc-spelling", `{maxAmplification: 4, retry: {retryOn: [unavailable, resource-exhausted, UNAVAILABLE]}}`, "spec.retry.retryOn[2]", metav1.CauseTypeFieldValueInvalid, `should match`},
		{"retry-on-grpc-ok", `{maxAmplification: 4, retry: {retryOn: [ok]}}`, "spec.retry.retryOn[0]", metav1.CauseTypeFieldValueInvalid, `should match`},
		// retryOn and methods are atomic lists (one owner under server-side apply, so that a
		// list applied replaces the defaults: TestServerSideApplyReplacesDefaultedLists); a CEL
		// rule refuses a value twice, as the set type did, and names it.
		{"retry-on-dup", `{maxAmplification: 4, retry: {retryOn: ["503", reset, "503"]}}`, "spec.retry.retryOn", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "503" is listed twice$`},
		{"method-dup", `{maxAmplification: 4, retry: {methods: [GET, PUT, PUT]}}`, "spec.retry.methods", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "PUT" is listed twice$`},
		{"method-unknown", `{maxAmplification: 4, retry: {methods: [GET, FETCH]}}`, "spec.retry.methods[1]", metav1.CauseTypeFieldValueNotSupported, `supported values`},
		{"percent-101", `{maxAmplification: 4, budget: {retryPercent: 101}}`, "spec.budget.retryPercent", metav1.CauseTypeFieldValueInvalid, `less than or equal to 100`},
		{"window-too-long", `{maxAmplification: 4, budget: {window: 2m}}`, "spec.budget.window", metav1.CauseTypeFieldValueInvalid, `must be between 1s and 60s`},
		{"breaker-zero", `{maxAmplification: 4, circuitBreaker: {failures: 0}}`, "spec.circuitBreaker.failures", metav1.CauseTypeFieldValueInvalid, `greater than or equal to 1`},
		{"open-negative", `{maxAmplification: 4, circuitBreaker: {openFor: -1s}}`, "spec.circuitBreaker.openFor", metav1.CauseTypeFieldValueInvalid, `should match`},
		// Names the injector refuses (annotations.ValidateHost): before, the API server stored
		// them and the injector skipped every pod of the policy as InvalidPolicy.
		{"dedup-space", `{maxAmplification: 4, retry: {dedupUpstreams: ["Pay ment"]}}`, "spec.retry.dedupUpstreams[0]", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "Pay ment": spec.retry.dedupUpstreams\[0\] in body should match`},
		{"dedup-upper", `{maxAmplification: 4, retry: {dedupUpstreams: [payment, Ledger]}}`, "spec.retry.dedupUpstreams[1]", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "Ledger": spec.retry.dedupUpstreams\[1\] in body should match`},
		{"dedup-port", `{maxAmplification: 4, retry: {dedupUpstreams: ["payment:8080"]}}`, "spec.retry.dedupUpstreams[0]", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "payment:8080": spec.retry.dedupUpstreams\[0\] in body should match`},
		{"dedup-attempts", `{maxAmplification: 4, retry: {dedupUpstreams: ["payment=3"]}}`, "spec.retry.dedupUpstreams[0]", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "payment=3": spec.retry.dedupUpstreams\[0\] in body should match`},
		// Past Go's and CEL's largest duration: before, the CEL conversion failed and the API
		// server answered `Invalid value: "string": type conversion error ...`.
		{"max-time-overflow", `{maxAmplification: 4, maxTimeToAnswer: 99999999999h}`, "spec.maxTimeToAnswer", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "99999999999h": must be between 1ms and 24h, written as 1 to 5 parts`},
		{"timeout-overflow", `{maxAmplification: 4, retry: {perTryTimeout: 2562048h}}`, "spec.retry.perTryTimeout", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "2562048h": must be between 1ms and 1h, written as 1 to 5 parts`},
		{"window-overflow", `{maxAmplification: 4, budget: {window: 99999999999s}}`, "spec.budget.window", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "99999999999s": must be between 1s and 60s$`},
		{"backoff-overflow", `{maxAmplification: 4, retry: {backoff: {base: 99999999999h, max: 1s}}}`, "spec.retry.backoff.base", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "99999999999h": must be between 1ms and 1m, written as 1 to 5 parts`},
		{"timeout-six-parts", `{maxAmplification: 4, retry: {perTryTimeout: 1h1m1s1ms1us1ns}}`, "spec.retry.perTryTimeout", metav1.CauseTypeFieldValueInvalid, `^Invalid value: "1h1m1s1ms1us1ns": must be between 1ms and 1h, written as 1 to 5 parts`},
		{"open-too-long", `{maxAmplification: 4, circuitBreaker: {openFor: 1h000000000000000000000000000000000000000000000000000000000000000s}}`, "spec.circuitBreaker.openFor", metav1.CauseType("FieldValueTooLong"), `may not be more than 64 bytes`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cli.Create(ctx(t), policy(t, tc.name, tc.spec))
			if err == nil {
				t.Fatalf("spec %s was accepted", tc.spec)
			}
			var status *apierrors.StatusError
			if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid status error, got %T: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), `RetryPolicy.retrycap.dev "`+tc.name+`" is invalid: `) {
				t.Errorf("error does not name the object: %v", err)
			}
			msg := regexp.MustCompile(tc.message)
			var causes []string
			for _, c := range status.ErrStatus.Details.Causes {
				causes = append(causes, fmt.Sprintf("%s %s %q", c.Field, c.Type, c.Message))
				if c.Field == tc.field && c.Type == tc.reason && msg.MatchString(c.Message) {
					return
				}
			}
			t.Errorf("no cause with field %s, reason %s, message ~ %q; causes:\n%s", tc.field, tc.reason, tc.message, strings.Join(causes, "\n"))
		})
	}
}

func TestKubectlGetPrintsThePrinterColumns(t *testing.T) {
	u := policy(t, "columns", `{maxAmplification: 7, enforcement: Audit}`)
	if err := cli.Create(ctx(t), u); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := cp.RunKubectl(ctx(t), "", "get", "rp", "-n", "default", "columns")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row, got:\n%s", out)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME CAP AMPLIFICATION WORST PATH WORST TIME MODE WITHIN CAP AGE" {
		t.Errorf("header = %q", lines[0])
	}
	// No controller runs here, so the status columns are empty: name, cap, mode and age remain.
	if got := strings.Fields(lines[1]); len(got) != 4 || got[0] != "columns" || got[1] != "7" || got[2] != "Audit" {
		t.Errorf("row = %q", lines[1])
	}
}

func clusterPolicy(t *testing.T, name, specYAML string) *unstructured.Unstructured {
	t.Helper()
	u := policy(t, name, specYAML)
	u.SetKind("ClusterRetryPolicy")
	u.SetNamespace("")
	return u
}

// The entrypoint rule differs by kind: a RetryPolicy names its own namespace's services, a
// ClusterRetryPolicy names "service.namespace".
func TestEntrypointNamesPerKind(t *testing.T) {
	cases := []struct {
		name    string
		obj     *unstructured.Unstructured
		field   string
		message string // "" when accepted (and read back), "accepted" when only accepted
	}{
		{"rp-qualified", policy(t, "rp-qualified", `{maxAmplification: 4, entrypoints: [{service: web.shop}]}`), "spec.entrypoints",
			`a RetryPolicy's entrypoints name services of its own namespace, without a namespace ("web", not "web.shop"); a chain across namespaces needs a ClusterRetryPolicy`},
		{"crp-bare", clusterPolicy(t, "crp-bare", `{namespaceSelector: {}, maxAmplification: 4, entrypoints: [{service: web}]}`), "spec.entrypoints",
			`a ClusterRetryPolicy's entrypoints name a service with its namespace ("web.shop")`},
		{"crp-no-selector", clusterPolicy(t, "crp-no-selector", `{maxAmplification: 4}`), "spec.namespaceSelector", `Required value`},
		{"crp-two-dots", clusterPolicy(t, "crp-two-dots", `{namespaceSelector: {}, maxAmplification: 4, entrypoints: [{service: web.shop.svc}]}`), "spec.entrypoints[0].service", `should match`},
		// A service or namespace name is a DNS-1123 label: before, 64 characters and more were
		// stored, an entrypoint no Service can have (the chain was then counted from none).
		{"rp-label-64", policy(t, "rp-label-64", `{maxAmplification: 4, entrypoints: [{service: `+strings.Repeat("a", 64)+`}]}`), "spec.entrypoints[0].service",
			`Invalid value: "` + strings.Repeat("a", 64) + `": spec.entrypoints[0].service in body should match '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$'`},
		{"crp-namespace-64", clusterPolicy(t, "crp-namespace-64", `{namespaceSelector: {}, maxAmplification: 4, entrypoints: [{service: web.`+strings.Repeat("n", 64)+`}]}`), "spec.entrypoints[0].service", `should match`},
		{"rp-label-63", policy(t, "rp-label-63", `{maxAmplification: 4, entrypoints: [{service: `+strings.Repeat("a", 63)+`}]}`), "", "accepted"},
		{"crp-ok", clusterPolicy(t, "crp-ok", `{namespaceSelector: {matchLabels: {team: x}}, maxAmplification: 4, entrypoints: [{service: web.shop, clientAttempts: 2}]}`), "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cli.Create(ctx(t), tc.obj)
			if tc.message == "accepted" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if tc.message == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				var p v1alpha1.ClusterRetryPolicy
				if err := cli.Get(ctx(t), client.ObjectKeyFromObject(tc.obj), &p); err != nil {
					t.Fatal(err)
				}
				if p.Spec.MaxAmplification != 4 || p.Spec.NamespaceSelector.MatchLabels["team"] != "x" ||
					p.Spec.Entrypoints[0].Service != "web.shop" || p.Spec.Enforcement != v1alpha1.EnforcementReject || p.Spec.Retry.DefaultAttempts != 1 {
					t.Errorf("read back as %+v", p.Spec)
				}
				return
			}
			var status *apierrors.StatusError
			if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid status error, got %T: %v", err, err)
			}
			var causes []string
			for _, c := range status.ErrStatus.Details.Causes {
				causes = append(causes, fmt.Sprintf("%s %q", c.Field, c.Message))
				if c.Field == tc.field && strings.Contains(c.Message, tc.message) {
					return
				}
			}
			t.Errorf("no cause with field %s, message ~ %q; causes:\n%s", tc.field, tc.message, strings.Join(causes, "\n"))
		})
	}
}

func TestKubectlGetCRPPrintsThePrinterColumns(t *testing.T) {
	u := clusterPolicy(t, "columns", `{namespaceSelector: {}, maxAmplification: 9, enforcement: Rewrite}`)
	if err := cli.Create(ctx(t), u); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := cp.RunKubectl(ctx(t), "", "get", "crp", "columns")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME CAP AMPLIFICATION WORST PATH WORST TIME MODE WITHIN CAP AGE" {
		t.Fatalf("kubectl get crp:\n%s", out)
	}
	if got := strings.Fields(lines[1]); len(got) != 4 || got[0] != "columns" || got[1] != "9" || got[2] != "Rewrite" {
		t.Errorf("row = %q", lines[1])
	}
}

// The whole answer to a duration past the largest one names the field, the value and the
// allowed range, and no conversion error: what a user of kubectl apply reads.
func TestDurationOverflowMessage(t *testing.T) {
	err := cli.Create(ctx(t), policy(t, "overflow", `{maxAmplification: 4, maxTimeToAnswer: 99999999999h}`))
	want := `RetryPolicy.retrycap.dev "overflow" is invalid: spec.maxTimeToAnswer: Invalid value: "99999999999h": must be between 1ms and 24h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h ("1m30s", "500ms")`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
	// 5 parts of 5 digits convert without overflow, and the bound refuses them.
	err = cli.Create(ctx(t), policy(t, "edge", `{maxAmplification: 4, maxTimeToAnswer: 99999h99999m99999s99999ms99999us}`))
	want = `RetryPolicy.retrycap.dev "edge" is invalid: spec.maxTimeToAnswer: Invalid value: "99999h99999m99999s99999ms99999us": must be between 1ms and 24h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h ("1m30s", "500ms")`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
}

// TestMaxTimeToAnswerBothKinds: the hostile durations a user may write in spec.maxTimeToAnswer
// are refused by the API server on both policy kinds, naming the field and the value, or stored
// and read back by the code as exactly the duration meant ("1h1h": Go's sum, 2h); never a value
// the code would read as 0 (unset) or wrap.
func TestMaxTimeToAnswerBothKinds(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration // 0: refused
	}{
		{"-1s", 0}, {"0s", 0}, {"0ms0s", 0}, {"1e3s", 0}, {"5", 0}, {"1,5s", 0}, {".5s", 0}, {"1.s", 0}, {" 2s", 0}, {"2S", 0},
		{"0.0001ms", 0}, {"24.0000001h", 0}, {"1.0000000001s", 0},
		{"99999999h", 0}, {"1h1m1s1ms1us1ns", 0}, {"1µs", 0},
		{"1ns", 0}, {"999us", 0}, {"99999h", 0}, {"24h1ns", 0}, {"1441m", 0},
		// A fraction, as Go's Duration.String writes one (what a typed client sends back):
		// before, "1.5s" was refused, so a typed read-modify-write of a policy holding
		// "1500ms" failed (TestTypedClientRoundTripsDurations).
		{"1.5s", 1500 * time.Millisecond}, {"0.5s", 500 * time.Millisecond}, {"1h0m0.5s", time.Hour + 500*time.Millisecond}, {"1.5h", 90 * time.Minute}, {"1.001ms", 1001 * time.Microsecond},
		{"1h1h", 2 * time.Hour}, {"1ms", time.Millisecond}, {"90s", 90 * time.Second}, {"24h", 24 * time.Hour}, {"1440m", 24 * time.Hour},
	} {
		for _, kind := range []string{"RetryPolicy", "ClusterRetryPolicy"} {
			name := fmt.Sprintf("mtta-%s-%x", strings.ToLower(kind[:2]), tc.value)
			var obj *unstructured.Unstructured
			if kind == "RetryPolicy" {
				obj = policy(t, name, `{maxAmplification: 4, maxTimeToAnswer: "`+tc.value+`"}`)
			} else {
				obj = clusterPolicy(t, name, `{namespaceSelector: {}, maxAmplification: 4, maxTimeToAnswer: "`+tc.value+`"}`)
			}
			err := cli.Create(ctx(t), obj)
			if tc.want == 0 {
				var status *apierrors.StatusError
				if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
					t.Errorf("%s %q: want Invalid, got %v", kind, tc.value, err)
					continue
				}
				found := false
				for _, c := range status.ErrStatus.Details.Causes {
					found = found || c.Field == "spec.maxTimeToAnswer" && strings.Contains(c.Message, fmt.Sprintf("%q", tc.value))
				}
				if !found {
					t.Errorf("%s %q: no cause naming spec.maxTimeToAnswer and the value: %v", kind, tc.value, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %q refused: %v", kind, tc.value, err)
				continue
			}
			var got *metav1.Duration
			if kind == "RetryPolicy" {
				var p v1alpha1.RetryPolicy
				err = cli.Get(ctx(t), client.ObjectKeyFromObject(obj), &p)
				got = p.Spec.MaxTimeToAnswer
			} else {
				var p v1alpha1.ClusterRetryPolicy
				err = cli.Get(ctx(t), client.ObjectKeyFromObject(obj), &p)
				got = p.Spec.MaxTimeToAnswer
			}
			if err != nil || got == nil || got.Duration != tc.want {
				t.Errorf("%s %q read back as %v (%v), want %v", kind, tc.value, got, err, tc.want)
			}
		}
	}
}

// TestDurationBoundsBothKinds (issue 25): every duration of a policy is bounded, and the API
// server refuses a value out of range on both kinds with the whole message naming the object,
// the field, the value and the range; the bounds themselves are stored.
func TestDurationBoundsBothKinds(t *testing.T) {
	const written = `, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h ("1m30s", "500ms")`
	cases := []struct {
		name, spec, want string // want: the message after the object; "" accepted
	}{
		{"try-days", `retry: {perTryTimeout: 99999h}`, `spec.retry.perTryTimeout: Invalid value: "99999h": must be between 1ms and 1h` + written},
		{"try-over", `retry: {perTryTimeout: 1h1ns}`, `spec.retry.perTryTimeout: Invalid value: "1h1ns": must be between 1ms and 1h` + written},
		{"try-under", `retry: {perTryTimeout: 999999ns}`, `spec.retry.perTryTimeout: Invalid value: "999999ns": must be between 1ms and 1h` + written},
		// Two causes, in either order (the API server's order of the fields is a map's).
		{"base-hours", `retry: {backoff: {base: 99999h, max: 99999h}}`, `spec.retry.backoff.base: Invalid value: "99999h": must be between 1ms and 1m` + written +
			"\n" + `spec.retry.backoff.max: Invalid value: "99999h": must be between 1ms and 1m` + written},
		{"base-under", `retry: {backoff: {base: 999us}}`, `spec.retry.backoff.base: Invalid value: "999us": must be between 1ms and 1m` + written},
		{"max-over", `retry: {backoff: {max: 1m1ns}}`, `spec.retry.backoff.max: Invalid value: "1m1ns": must be between 1ms and 1m` + written},
		{"mtta-over", `maxTimeToAnswer: 24h1ns`, `spec.maxTimeToAnswer: Invalid value: "24h1ns": must be between 1ms and 24h` + written},
		{"window-over", `circuitBreaker: {window: 1h1ns}`, `spec.circuitBreaker.window: Invalid value: "1h1ns": must be between 1ms and 1h` + written},
		{"open-over", `circuitBreaker: {openFor: 61m}`, `spec.circuitBreaker.openFor: Invalid value: "61m": must be between 1ms and 1h` + written},
		{"budget-over", `budget: {window: 60s1ns}`, `spec.budget.window: Invalid value: "60s1ns": must be between 1s and 60s`},
		{"at-bounds-high", `retry: {perTryTimeout: 1h, backoff: {base: 1m, max: 1m}}, maxTimeToAnswer: 24h, circuitBreaker: {window: 1h, openFor: 1h}`, ""},
		{"at-bounds-low", `retry: {perTryTimeout: 1ms, backoff: {base: 1ms, max: 1ms}}, maxTimeToAnswer: 1ms, circuitBreaker: {window: 1ms, openFor: 1ms}`, ""},
	}
	for _, tc := range cases {
		for _, kind := range []string{"RetryPolicy", "ClusterRetryPolicy"} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				var obj *unstructured.Unstructured
				if kind == "RetryPolicy" {
					obj = policy(t, "bound-"+tc.name, "{maxAmplification: 4, "+tc.spec+"}")
				} else {
					obj = clusterPolicy(t, "bound-"+tc.name, "{namespaceSelector: {}, maxAmplification: 4, "+tc.spec+"}")
				}
				err := cli.Create(ctx(t), obj)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("refused at the bounds: %v", err)
					}
					return
				}
				prefix := kind + `.retrycap.dev "bound-` + tc.name + `" is invalid: `
				want := []string{prefix + tc.want}
				if one, two, ok := strings.Cut(tc.want, "\n"); ok {
					want = []string{prefix + "[" + one + ", " + two + "]", prefix + "[" + two + ", " + one + "]"}
				}
				if err == nil || !slices.Contains(want, err.Error()) {
					t.Fatalf("error\n%v\nwant\n%s", err, strings.Join(want, "\nor\n"))
				}
			})
		}
	}
}

// TestDedupUpstreamsAgreeWithTheInjector: the API server accepts a spec.retry.dedupUpstreams
// name exactly when the injector does (annotations.ValidateHost, which SettingsFor applies):
// before, "Payment" or "payment:8080" was stored, and every pod the policy selected was then
// skipped as InvalidPolicy, the policy's status saying nothing.
func TestDedupUpstreamsAgreeWithTheInjector(t *testing.T) {
	long := strings.Repeat("a", 63)
	for i, name := range []string{
		"payment", "ledger.billing", "ledger.billing.svc.cluster.local", "api.example.com", "a", "0-9", long, long + "." + long,
		"Payment", "pay ment", "payment:8080", "payment=3", "-payment", "payment-", "payment.", ".payment", "a..b", "pay_ment", long + "a", "päyment",
	} {
		injector := annotations.ValidateHost(name) == ""
		err := cli.Create(ctx(t), policy(t, fmt.Sprintf("dedup-agree-%d", i), fmt.Sprintf(`{maxAmplification: 4, retry: {dedupUpstreams: [%q]}}`, name)))
		if apiServer := err == nil; apiServer != injector {
			t.Errorf("dedupUpstreams %q: API server accepts %t (%v), injector accepts %t", name, apiServer, err, injector)
		}
	}
}

// A Go program that reads a policy with the typed API and writes it back (a controller's
// read-modify-write, a kubebuilder tool importing this package) sends each duration as
// metav1.Duration writes it, Go's Duration.String: "1500ms" goes back as "1.5s", "90500ms" as
// "1m30.5s". Before, the CRD's pattern refused any fraction, so that Update failed on a policy
// the same API server had stored ("spec.maxTimeToAnswer: Invalid value: \"1.5s\": ... should
// match"), whatever the program changed. Now the update is stored and every duration reads back
// as the one written.
func TestTypedClientRoundTripsDurations(t *testing.T) {
	const spec = `{maxAmplification: 4, maxTimeToAnswer: 1500ms, retry: {perTryTimeout: 2500ms, backoff: {base: 1500us, max: 2500ms}}, circuitBreaker: {window: 90500ms, openFor: 1001ms}}`
	want := map[string]string{"maxTimeToAnswer": "1.5s", "perTryTimeout": "2.5s", "base": "1.5ms", "max": "2.5s", "window": "1m30.5s", "openFor": "1.001s"}
	for _, kind := range []string{"RetryPolicy", "ClusterRetryPolicy"} {
		var obj *unstructured.Unstructured
		var typed client.Object
		var specOf func() *v1alpha1.RetryPolicySpec
		if kind == "RetryPolicy" {
			obj = policy(t, "typed-roundtrip", spec)
			p := &v1alpha1.RetryPolicy{}
			typed, specOf = p, func() *v1alpha1.RetryPolicySpec { return &p.Spec }
		} else {
			obj = clusterPolicy(t, "typed-roundtrip", `{namespaceSelector: {}, `+spec[1:])
			p := &v1alpha1.ClusterRetryPolicy{}
			typed, specOf = p, func() *v1alpha1.RetryPolicySpec { return &p.Spec.RetryPolicySpec }
		}
		if err := cli.Create(ctx(t), obj); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if err := cli.Get(ctx(t), client.ObjectKeyFromObject(obj), typed); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		specOf().MaxAmplification = 5
		if err := cli.Update(ctx(t), typed); err != nil {
			t.Fatalf("%s: typed update refused: %v", kind, err)
		}
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(obj.GroupVersionKind())
		if err := cli.Get(ctx(t), client.ObjectKeyFromObject(obj), stored); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for name, path := range map[string][]string{
			"maxTimeToAnswer": {"spec", "maxTimeToAnswer"}, "perTryTimeout": {"spec", "retry", "perTryTimeout"},
			"base": {"spec", "retry", "backoff", "base"}, "max": {"spec", "retry", "backoff", "max"},
			"window": {"spec", "circuitBreaker", "window"}, "openFor": {"spec", "circuitBreaker", "openFor"},
		} {
			got[name], _, _ = unstructured.NestedString(stored.Object, path...)
		}
		amp, _, _ := unstructured.NestedInt64(stored.Object, "spec", "maxAmplification")
		if fmt.Sprint(got) != fmt.Sprint(want) || amp != 5 {
			t.Errorf("%s stored %v, maxAmplification %d; want %v and 5", kind, got, amp, want)
		}
		if err := cli.Delete(ctx(t), obj); err != nil {
			t.Fatal(err)
		}
	}
}
