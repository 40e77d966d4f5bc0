package analyze

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/jsonfield"
)

// The RetryPolicy CRD's schema bounds some fields with a pattern, an enum or a CEL rule that
// the API server checks before it stores a policy (config/crd/bases; api/v1alpha1's markers).
// Offline, analyze checks them before it decodes the policy, on the values as written, so that
// a policy the cluster would refuse is an error here too, naming the field and the value: "-1s"
// decodes to a negative duration (no timeout, an unbounded time here) and "10" fails inside
// metav1.Duration with "time: missing unit", naming no field. policyfields_test.go checks the
// lists against the CRD files.

// durationPattern is the CRD's pattern of every duration field.
var durationPattern = regexp.MustCompile(`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`)

// durationParts is the CRD's CEL guard before it converts a duration (duration(self)): parts of
// at most 5 digits, at most 5 of them, so that the sum stays under Go's and CEL's largest
// duration (2562047h47m16.854775807s; 5 x 99999h is 499995h). Without it, "99999999999h" made
// the conversion fail and the API server answered "Invalid value: "string": type conversion
// error", naming neither the value nor the range.
var durationParts = regexp.MustCompile(`^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$`)

// durationPartsText is how a bounded duration field is written, as the CRD's messages say it.
const durationPartsText = `1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h ("1m30s", "500ms")`

// durationMaxLength is the CRD's maxLength of a duration field (which bounds the cost of its CEL
// rule).
const durationMaxLength = 64

// durationField is a duration in a policy's spec and the bounds its CEL rule sets
// (api/v1alpha1/defaults), lo and hi as the rule writes them.
type durationField struct {
	path     []string // under spec
	min, max time.Duration
	lo, hi   string
	// parts: the CRD's message also says how the value is written (every field but
	// budget.window, whose message predates the others' bounds).
	parts bool
}

func bounded(path []string, lo, hi time.Duration) durationField {
	return durationField{path: path, min: lo, max: hi, lo: defaults.FormatDuration(lo), hi: defaults.FormatDuration(hi), parts: true}
}

var durationFields = []durationField{
	bounded([]string{"maxTimeToAnswer"}, defaults.MaxTimeToAnswerMin, defaults.MaxTimeToAnswerMax),
	bounded([]string{"retry", "perTryTimeout"}, defaults.PerTryTimeoutMin, defaults.PerTryTimeoutMax),
	bounded([]string{"retry", "backoff", "base"}, defaults.BackoffBoundMin, defaults.BackoffBoundMax),
	bounded([]string{"retry", "backoff", "max"}, defaults.BackoffBoundMin, defaults.BackoffBoundMax),
	{path: []string{"budget", "window"}, min: defaults.BudgetWindowMin, max: defaults.BudgetWindowMax, lo: "1s", hi: "60s"},
	bounded([]string{"circuitBreaker", "window"}, defaults.BreakerWindowMin, defaults.BreakerWindowMax),
	bounded([]string{"circuitBreaker", "openFor"}, defaults.BreakerOpenForMin, defaults.BreakerOpenForMax),
}

// retryOnPattern is the CRD's pattern of spec.retry.retryOn's items.
var retryOnPattern = regexp.MustCompile(`^(connect-failure|reset|timeout|[45][0-9][0-9]|cancelled|unknown|invalid-argument|deadline-exceeded|not-found|already-exists|permission-denied|resource-exhausted|failed-precondition|aborted|out-of-range|unimplemented|internal|unavailable|data-loss|unauthenticated)$`)

// retryMethods is the CRD's enum of spec.retry.methods' items.
var retryMethods = []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "POST", "PATCH", "TRACE"}

// checkPolicyFields checks the bounded fields of a policy's spec (js: the whole object) as the
// API server would; it leaves type errors to the decoder.
func checkPolicyFields(js []byte) error {
	var obj struct {
		Spec map[string]any `json:"spec"`
	}
	if json.Unmarshal(js, &obj) != nil || obj.Spec == nil {
		return nil
	}
	durs := map[string]time.Duration{}
	for _, f := range durationFields {
		v, ok := lookup(obj.Spec, f.path)
		if !ok || v == nil {
			continue
		}
		name := "spec." + strings.Join(f.path, ".")
		s, isString := v.(string)
		if !isString {
			continue // the decoder names the type
		}
		if !durationPattern.MatchString(s) {
			return fieldError(name, s, `%q is not a duration of digits (a fraction allowed) and units ns, us, ms, s, m, h ("500ms", "1.5s", "1m30s")`)
		}
		if len(s) > durationMaxLength {
			return fieldError(name, s, fmt.Sprintf("%%q is longer than %d bytes", durationMaxLength))
		}
		d, err := time.ParseDuration(s)
		inParts := durationParts.MatchString(s) && err == nil
		if !inParts || d < f.min || d > f.max {
			msg := "%q must be between " + f.lo + " and " + f.hi
			if f.parts {
				msg += ", written as " + durationPartsText
			}
			return fieldError(name, s, msg)
		}
		durs[name] = d
	}
	base, hasBase := durs["spec.retry.backoff.base"]
	if mx, hasMax := durs["spec.retry.backoff.max"]; hasBase && hasMax && base > mx {
		return fmt.Errorf("spec.retry.backoff.base: %s must not exceed spec.retry.backoff.max %s", base, mx)
	}
	if v, ok := lookup(obj.Spec, []string{"retry", "retryOn"}); ok {
		if items, ok := v.([]any); ok {
			for i, it := range items {
				if s, ok := it.(string); ok && !retryOnPattern.MatchString(s) {
					return fieldError(fmt.Sprintf("spec.retry.retryOn[%d]", i), s, "%q is not connect-failure, reset, timeout, an HTTP status code (4xx, 5xx) or a gRPC status code name in lower case with dashes (unavailable, resource-exhausted, ...)")
				}
			}
			if err := listedTwice("spec.retry.retryOn", items); err != nil {
				return err
			}
		}
	}
	if v, ok := lookup(obj.Spec, []string{"retry", "methods"}); ok {
		if items, ok := v.([]any); ok {
			for i, it := range items {
				if s, ok := it.(string); ok && !slices.Contains(retryMethods, s) {
					return fieldError(fmt.Sprintf("spec.retry.methods[%d]", i), s, "%q is not one of "+strings.Join(retryMethods, ", "))
				}
			}
			if err := listedTwice("spec.retry.methods", items); err != nil {
				return err
			}
		}
	}
	return nil
}

// listedTwice is the CRD's CEL rule on retryOn and methods (atomic lists since api20, so that
// server-side apply replaces the defaults; the rule keeps the set type's refusal of a value
// twice): the first value that appears twice, in the API server's words, with both indexes.
func listedTwice(path string, items []any) error {
	first := map[string]int{}
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			continue // the decoder names the type
		}
		if j, seen := first[s]; seen {
			return fieldError(path, s, fmt.Sprintf("%%q is listed twice (at [%d] and [%d])", j, i))
		}
		first[s] = i
	}
	return nil
}

// lookup walks a decoded JSON object along path.
func lookup(obj map[string]any, path []string) (any, bool) {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// fieldError is the string value s at path refused: a *jsonfield.Error whose Msg is format with
// s quoted in it (format holds one %q), its Value s as JSON text.
func fieldError(path, s, format string) error {
	return &jsonfield.Error{Path: path, Value: jsonfield.Quote(s), Msg: fmt.Sprintf(format, s)}
}
