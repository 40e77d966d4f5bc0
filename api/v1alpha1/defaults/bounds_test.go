package defaults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
)

// crdBounds returns the bounds the generated CRD file declares under spec, by the path of the
// property ("budget.retryPercent"; "[]" for list items): "min N" and "max N" for the OpenAPI
// minimum and maximum (JSON numbers, decoded as float64), "min D", "max D" and "> D" for the
// durations a CEL rule compares duration(self) with (D as time.Duration writes it).
func crdBounds(t *testing.T, file string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s: want one version, got %d", file, len(crd.Spec.Versions))
	}
	spec := prop(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "spec")
	cmpDur := regexp.MustCompile(`duration\(self\) (>=|<=|>) duration\('([^']+)'\)`)
	op := map[string]string{">=": "min", "<=": "max", ">": ">"}
	out := map[string][]string{}
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		for _, k := range []string{"minimum", "maximum"} {
			if v, ok := s[k]; ok {
				out[path] = append(out[path], k[:3]+" "+strconv.FormatFloat(v.(float64), 'f', -1, 64))
			}
		}
		if rules, ok := s["x-kubernetes-validations"].([]any); ok {
			for _, r := range rules {
				for _, m := range cmpDur.FindAllStringSubmatch(r.(map[string]any)["rule"].(string), -1) {
					v, err := time.ParseDuration(m[2])
					if err != nil {
						t.Fatalf("%s: spec.%s: rule %q: %v", file, path, m[0], err)
					}
					out[path] = append(out[path], op[m[1]]+" "+v.String())
				}
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
	for p := range out {
		sort.Strings(out[p])
	}
	return out
}

// TestCRDBoundsAreTheGoConstants: the validation markers cannot name Go constants, so both
// generated CRDs are compared with bounds.go, bound by bound, and no bound of theirs is left
// unchecked (a marker added without its constant fails here).
func TestCRDBoundsAreTheGoConstants(t *testing.T) {
	n := func(kind string, v int) string { return fmt.Sprintf("%s %d", kind, v) }
	d := func(kind string, v time.Duration) string { return kind + " " + v.String() }
	want := map[string][]string{
		"maxAmplification":             {n("max", defaults.MaxAmplificationMax), n("min", defaults.MaxAmplificationMin)},
		"retry.defaultAttempts":        {n("max", defaults.AttemptsMax), n("min", defaults.AttemptsMin)},
		"entrypoints[].clientAttempts": {n("max", defaults.AttemptsMax), n("min", defaults.AttemptsMin)},
		"budget.retryPercent":          {n("max", defaults.BudgetPercentMax), n("min", defaults.BudgetPercentMin)},
		"budget.minRetriesPerSecond":   {n("max", defaults.BudgetMinPerSecondMax), n("min", defaults.BudgetMinPerSecondMin)},
		"circuitBreaker.failures":      {n("max", defaults.BreakerFailuresMax), n("min", defaults.BreakerFailuresMin)},
		"budget.window":                {d("max", defaults.BudgetWindowMax), d("min", defaults.BudgetWindowMin)},
		"retry.perTryTimeout":          {d("max", defaults.PerTryTimeoutMax), d("min", defaults.PerTryTimeoutMin)},
		"retry.backoff.base":           {d("max", defaults.BackoffBoundMax), d("min", defaults.BackoffBoundMin)},
		"retry.backoff.max":            {d("max", defaults.BackoffBoundMax), d("min", defaults.BackoffBoundMin)},
		"circuitBreaker.window":        {d("max", defaults.BreakerWindowMax), d("min", defaults.BreakerWindowMin)},
		"circuitBreaker.openFor":       {d("max", defaults.BreakerOpenForMax), d("min", defaults.BreakerOpenForMin)},
		"maxTimeToAnswer":              {d("max", defaults.MaxTimeToAnswerMax), d("min", defaults.MaxTimeToAnswerMin)},
	}
	for _, file := range []string{"retrycap.dev_retrypolicies.yaml", "retrycap.dev_clusterretrypolicies.yaml"} {
		got := crdBounds(t, file)
		if !reflect.DeepEqual(got, want) {
			for p, b := range got {
				if !reflect.DeepEqual(b, want[p]) {
					t.Errorf("%s: spec.%s: CRD bounds %q, Go constants %q", file, p, b, want[p])
				}
			}
			for p, b := range want {
				if _, ok := got[p]; !ok {
					t.Errorf("%s: spec.%s: no bound in the CRD, Go constants %q", file, p, b)
				}
			}
		}
	}
}

func TestCheckDuration(t *testing.T) {
	for _, tc := range []struct {
		d, lo, hi time.Duration
		want      string
	}{
		{time.Millisecond, time.Millisecond, time.Hour, ""},
		{time.Hour, time.Millisecond, time.Hour, ""},
		{time.Hour + 1, time.Millisecond, time.Hour, "must be between 1ms and 1h"},
		{time.Millisecond - 1, time.Millisecond, time.Hour, "must be between 1ms and 1h"},
		{0, time.Millisecond, time.Minute, "must be between 1ms and 1m"},
		{-1 << 63, time.Millisecond, 24 * time.Hour, "must be between 1ms and 24h"},
		{1<<63 - 1, time.Second, 60 * time.Second, "must be between 1s and 1m"},
		{90 * time.Second, time.Microsecond, 1500 * time.Millisecond, "must be between 1us and 1500ms"},
	} {
		if got := defaults.CheckDuration(tc.d, tc.lo, tc.hi); got != tc.want {
			t.Errorf("CheckDuration(%d, %s, %s) = %q, want %q", tc.d, tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestBoundsKeepSumsInsideInt64: the largest sum the proxy makes from bounded values (every try
// of the most attempts at the longest per-try timeout, each followed by the longest backoff, then
// the longest deadline and the longest of its own timeouts) stays under 2^62 nanoseconds, so that
// added to its clock (Unix nanoseconds, under 2^62 until 2116) nothing wraps int64.
func TestBoundsKeepSumsInsideInt64(t *testing.T) {
	sum := defaults.AttemptsMax*(defaults.PerTryTimeoutMax+defaults.BackoffBoundMax) +
		defaults.MaxTimeToAnswerMax + defaults.ProxyTimeoutMax + defaults.BreakerOpenForMax + defaults.BudgetWindowMax
	if sum <= 0 || sum >= 1<<62 {
		t.Fatalf("largest sum %v: want under 2^62 ns", sum)
	}
}
