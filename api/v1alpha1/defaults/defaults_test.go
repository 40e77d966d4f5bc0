package defaults_test

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
)

// crdDefaults returns every non-empty OpenAPI default of the generated RetryPolicy CRD, by the
// path of its property under spec ("retry.backoff.base"; "[]" for list items).
func crdDefaults(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", "retrycap.dev_retrypolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != v1alpha1.GroupVersion.Version {
		t.Fatalf("want one version %s in the CRD, got %+v", v1alpha1.GroupVersion.Version, crd.Spec.Versions)
	}
	spec := prop(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "spec")
	out := map[string]any{}
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		if d, ok := s["default"]; ok {
			if m, isMap := d.(map[string]any); !isMap || len(m) > 0 {
				out[path] = d
			}
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for name, p := range props {
				walk(strings.TrimPrefix(path+"."+name, "."), p.(map[string]any))
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(path+"[]", items)
		}
	}
	walk("", spec)
	return out
}

func prop(t *testing.T, s map[string]any, name string) map[string]any {
	t.Helper()
	p, ok := s["properties"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("no property %s in the CRD schema", name)
	}
	return p
}

// TestCRDDefaultsAreTheGoConstants: the +kubebuilder:default markers cannot name Go constants,
// so the generated CRD is compared with them, default by default, and no default of the CRD is
// left unchecked.
func TestCRDDefaultsAreTheGoConstants(t *testing.T) {
	list := func(l []string) []any {
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out
	}
	// JSON numbers decode as float64.
	want := map[string]any{
		"enforcement":                  defaults.Enforcement,
		"entrypoints[].clientAttempts": float64(defaults.ClientAttempts),
		"retry.defaultAttempts":        float64(defaults.Attempts),
		"retry.perTryTimeout":          dur(defaults.PerTryTimeout),
		"retry.backoff.base":           dur(defaults.BackoffBase),
		"retry.backoff.max":            dur(defaults.BackoffMax),
		"retry.retryOn":                list(defaults.RetryOn()),
		"retry.methods":                list(defaults.Methods()),
		"budget.retryPercent":          float64(defaults.BudgetPercent),
		"budget.minRetriesPerSecond":   float64(defaults.BudgetMinPerSecond),
		"budget.window":                dur(defaults.BudgetWindow),
		"circuitBreaker.failures":      float64(defaults.BreakerFailures),
		"circuitBreaker.window":        dur(defaults.BreakerWindow),
		"circuitBreaker.openFor":       dur(defaults.BreakerOpenFor),
		"injection.enabled":            defaults.InjectionEnabled,
		"observability.accessLog":      defaults.AccessLog,
	}
	got := crdDefaults(t)
	keys := func(m map[string]any) []string {
		var k []string
		for p := range m {
			k = append(k, p)
		}
		sort.Strings(k)
		return k
	}
	if !reflect.DeepEqual(keys(got), keys(want)) {
		t.Fatalf("CRD defaults at %v, the Go constants cover %v", keys(got), keys(want))
	}
	for _, p := range keys(want) {
		if !reflect.DeepEqual(got[p], want[p]) {
			t.Errorf("spec.%s: CRD default %#v, Go constant %#v", p, got[p], want[p])
		}
	}
	if defaults.AccessLog != string(v1alpha1.AccessLogOff) {
		t.Errorf("defaults.AccessLog %q is not v1alpha1.AccessLogOff", defaults.AccessLog)
	}
	if defaults.Enforcement != string(v1alpha1.EnforcementReject) {
		t.Errorf("defaults.Enforcement %q is not v1alpha1.EnforcementReject", defaults.Enforcement)
	}
}

// dur writes a duration as the markers do ("2s", "100ms", "1m"): Go's String with the zero
// units dropped.
func dur(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, z) {
			s = s[:len(s)-len(z)+1]
		}
	}
	return s
}

func TestListsAreFresh(t *testing.T) {
	a := defaults.RetryOn()
	a[0] = "x"
	if defaults.RetryOn()[0] == "x" {
		t.Fatal("RetryOn shares its slice")
	}
	m := defaults.Methods()
	m[0] = "x"
	if defaults.Methods()[0] == "x" {
		t.Fatal("Methods shares its slice")
	}
}
