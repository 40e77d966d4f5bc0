package analyze

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestPolicyFieldsMatchCRD checks checkPolicyFields' lists against the generated CRDs: every
// duration field (and its CEL bounds), retryOn's pattern and methods' enum, for both kinds. A
// new bounded field in api/v1alpha1 fails here until analyze checks it too.
func TestPolicyFieldsMatchCRD(t *testing.T) {
	files, err := filepath.Glob("../../config/crd/bases/retrycap.dev_*retrypolicies.yaml")
	if err != nil || len(files) != 2 {
		t.Fatalf("CRD files: %v, %v", files, err)
	}
	var want []string
	for _, f := range durationFields {
		guard := "self.matches('" + durationParts.String() + "') && "
		rule := guard + fmt.Sprintf("duration(self) >= duration('%s') && duration(self) <= duration('%s')", f.lo, f.hi)
		want = append(want, "spec."+strings.Join(f.path, ".")+" "+rule)
	}
	slices.Sort(want)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		var got []string
		var walk func(path string, s apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
			if s.Pattern == durationPattern.String() {
				var rules []string
				for _, r := range s.XValidations {
					rules = append(rules, r.Rule)
				}
				got = append(got, path+" "+strings.Join(rules, "; "))
			}
			for k, p := range s.Properties {
				walk(path+"."+k, p)
			}
		}
		walk("spec", spec)
		slices.Sort(got)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: duration fields\n%s\nchecked by analyze:\n%s", file, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		retry := spec.Properties["retry"]
		if p := retry.Properties["retryOn"].Items.Schema.Pattern; p != retryOnPattern.String() {
			t.Errorf("%s: retryOn pattern %s, analyze checks %s", file, p, retryOnPattern)
		}
		var enum []string
		for _, e := range retry.Properties["methods"].Items.Schema.Enum {
			enum = append(enum, strings.Trim(string(e.Raw), `"`))
		}
		if !slices.Equal(enum, retryMethods) {
			t.Errorf("%s: methods enum %v, analyze checks %v", file, enum, retryMethods)
		}
		// retryOn and methods are atomic lists whose CEL rule refuses a value twice (api20):
		// listedTwice is that rule.
		const twice = "self.all(x, self.exists_one(y, y == x))"
		for _, f := range []string{"retryOn", "methods"} {
			p := retry.Properties[f]
			if p.XListType == nil || *p.XListType != "atomic" || len(p.XValidations) != 1 || p.XValidations[0].Rule != twice {
				t.Errorf("%s: %s list type %v, rules %v; analyze checks an atomic list with the rule %s", file, f, p.XListType, p.XValidations, twice)
			}
		}
		if rules := spec.Properties["retry"].Properties["backoff"].XValidations; len(rules) != 1 || rules[0].Rule != "!has(self.base) || !has(self.max) || !self.base.matches('"+durationParts.String()+"') || !self.max.matches('"+durationParts.String()+"') || duration(self.base) <= duration(self.max)" {
			t.Errorf("%s: backoff rules %v, analyze checks base <= max", file, rules)
		}
	}
}

// A policy the API server would refuse for a bounded field is an error naming the field and the
// value (before: "-1s" and "0s" were read as no timeout, "10" failed in metav1.Duration with
// "time: missing unit" naming no field, "5xx" and "get" were read).
func TestPolicyFields(t *testing.T) {
	doc := func(kind, spec string) string {
		name := "metadata: {name: p, namespace: shop}"
		if kind == "ClusterRetryPolicy" {
			name = "metadata: {name: p}"
		}
		return "apiVersion: retrycap.dev/v1alpha1\nkind: " + kind + "\n" + name + "\nspec:\n  maxAmplification: 4\n  namespaceSelector: {}\n" + spec
	}
	cases := []struct{ kind, spec, want string }{
		{"RetryPolicy", "  retry: {perTryTimeout: 2s, backoff: {base: 25ms, max: 1s}, retryOn: [reset, \"503\", unavailable], methods: [GET, POST]}\n  maxTimeToAnswer: 1m30s\n  budget: {window: 60s}\n", ""},
		{"RetryPolicy", "  retry: {perTryTimeout: -1s}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "-1s" is not a duration of digits (a fraction allowed) and units ns, us, ms, s, m, h ("500ms", "1.5s", "1m30s")`},
		{"RetryPolicy", "  retry: {perTryTimeout: \"10\"}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "10" is not a duration of digits (a fraction allowed) and units ns, us, ms, s, m, h ("500ms", "1.5s", "1m30s")`},
		{"RetryPolicy", "  retry: {perTryTimeout: 1h2x}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "1h2x" is not a duration of digits (a fraction allowed) and units ns, us, ms, s, m, h ("500ms", "1.5s", "1m30s")`},
		{"RetryPolicy", "  retry: {perTryTimeout: 1.5sec}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "1.5sec" is not a duration of digits (a fraction allowed) and units ns, us, ms, s, m, h ("500ms", "1.5s", "1m30s")`},
		{"RetryPolicy", "  maxTimeToAnswer: 0s\n", `RetryPolicy shop/p: spec.maxTimeToAnswer: "0s" must be between 1ms and 24h, written as ` + durationPartsText},
		{"RetryPolicy", "  maxTimeToAnswer: 99999999999h\n", `RetryPolicy shop/p: spec.maxTimeToAnswer: "99999999999h" must be between 1ms and 24h, written as ` + durationPartsText},
		{"RetryPolicy", "  maxTimeToAnswer: 1h1m1s1ms1us1ns\n", `RetryPolicy shop/p: spec.maxTimeToAnswer: "1h1m1s1ms1us1ns" must be between 1ms and 24h, written as ` + durationPartsText},
		{"RetryPolicy", "  budget: {window: 99999999999s}\n", `RetryPolicy shop/p: spec.budget.window: "99999999999s" must be between 1s and 60s`},
		{"RetryPolicy", "  retry: {perTryTimeout: 1h000000000000000000000000000000000000000000000000000000000000000s}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "1h000000000000000000000000000000000000000000000000000000000000000s" is longer than 64 bytes`},
		{"RetryPolicy", "  budget: {window: 2m}\n", `RetryPolicy shop/p: spec.budget.window: "2m" must be between 1s and 60s`},
		{"RetryPolicy", "  budget: {window: 500ms}\n", `RetryPolicy shop/p: spec.budget.window: "500ms" must be between 1s and 60s`},
		{"RetryPolicy", "  circuitBreaker: {openFor: 0ms}\n", `RetryPolicy shop/p: spec.circuitBreaker.openFor: "0ms" must be between 1ms and 1h, written as ` + durationPartsText},
		// The upper bounds (issue 25): a backoff of hours or a per-try timeout of days is a
		// mistake; before, each was read and modelled.
		{"RetryPolicy", "  retry: {perTryTimeout: 99999h}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "99999h" must be between 1ms and 1h, written as ` + durationPartsText},
		{"RetryPolicy", "  retry: {perTryTimeout: 60m1ns}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "60m1ns" must be between 1ms and 1h, written as ` + durationPartsText},
		{"RetryPolicy", "  retry: {perTryTimeout: 999us}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: "999us" must be between 1ms and 1h, written as ` + durationPartsText},
		{"RetryPolicy", "  retry: {backoff: {base: 99999h, max: 99999h}}\n", `RetryPolicy shop/p: spec.retry.backoff.base: "99999h" must be between 1ms and 1m, written as ` + durationPartsText},
		{"RetryPolicy", "  retry: {backoff: {max: 61s}}\n", `RetryPolicy shop/p: spec.retry.backoff.max: "61s" must be between 1ms and 1m, written as ` + durationPartsText},
		{"RetryPolicy", "  maxTimeToAnswer: 24h1ms\n", `RetryPolicy shop/p: spec.maxTimeToAnswer: "24h1ms" must be between 1ms and 24h, written as ` + durationPartsText},
		{"RetryPolicy", "  circuitBreaker: {window: 2h}\n", `RetryPolicy shop/p: spec.circuitBreaker.window: "2h" must be between 1ms and 1h, written as ` + durationPartsText},
		{"RetryPolicy", "  retry: {perTryTimeout: 1h, backoff: {base: 1ms, max: 1m}}\n  maxTimeToAnswer: 24h\n  circuitBreaker: {window: 60m, openFor: 1ms}\n", ""},
		{"RetryPolicy", "  retry: {backoff: {base: 5s, max: 1s}}\n", `RetryPolicy shop/p: spec.retry.backoff.base: 5s must not exceed spec.retry.backoff.max 1s`},
		{"RetryPolicy", "  retry: {retryOn: [reset, 5xx]}\n", `RetryPolicy shop/p: spec.retry.retryOn[1]: "5xx" is not connect-failure, reset, timeout, an HTTP status code (4xx, 5xx) or a gRPC status code name in lower case with dashes (unavailable, resource-exhausted, ...)`},
		{"RetryPolicy", "  retry: {methods: [get]}\n", `RetryPolicy shop/p: spec.retry.methods[0]: "get" is not one of GET, HEAD, OPTIONS, PUT, DELETE, POST, PATCH, TRACE`},
		// A value twice, refused by the CRD's CEL rule since api20 made the lists atomic
		// (before: read as once).
		{"RetryPolicy", "  retry: {retryOn: [\"503\", \"503\"], methods: [GET, GET]}\n", `RetryPolicy shop/p: spec.retry.retryOn: "503" is listed twice (at [0] and [1])`},
		{"RetryPolicy", "  retry: {retryOn: [reset, \"503\", unavailable, \"503\"]}\n", `RetryPolicy shop/p: spec.retry.retryOn: "503" is listed twice (at [1] and [3])`},
		{"RetryPolicy", "  retry: {methods: [GET, PUT, PUT]}\n", `RetryPolicy shop/p: spec.retry.methods: "PUT" is listed twice (at [1] and [2])`},
		{"ClusterRetryPolicy", "  retry: {methods: [GET, GET]}\n", `ClusterRetryPolicy p: spec.retry.methods: "GET" is listed twice (at [0] and [1])`},
		{"RetryPolicy", "  retry: {perTryTimeout: 2}\n", `RetryPolicy shop/p: spec.retry.perTryTimeout: 2 is a number, want a string (quote it)`},
		{"ClusterRetryPolicy", "  retry: {perTryTimeout: -1s}\n", `ClusterRetryPolicy p: spec.retry.perTryTimeout: "-1s" is not a duration of digits (a fraction allowed) and units ns, us, ms, s, m, h ("500ms", "1.5s", "1m30s")`},
	}
	for _, tc := range cases {
		d := tc.spec
		if tc.kind == "RetryPolicy" {
			d = strings.Replace(doc(tc.kind, d), "  namespaceSelector: {}\n", "", 1)
		} else {
			d = doc(tc.kind, d)
		}
		m := NewManifests()
		errs := (Reader{}).Read(m, "p.yaml", strings.NewReader(d))
		var got string
		if len(errs) > 0 {
			got = strings.TrimPrefix(errs[0].Error(), "p.yaml: document 1: ")
		}
		if len(errs) > 1 || got != tc.want {
			t.Errorf("%s\nerrors %v\nwant %q", tc.spec, errs, tc.want)
		}
	}
}
