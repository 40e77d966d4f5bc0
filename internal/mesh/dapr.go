package mesh

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

// Dapr (dapr/dapr): a caller whose pod template has dapr.io/enabled "true" invokes other apps
// through its sidecar (service invocation, the callee named by its app-id: the upstream's name).
// Read from dapr/dapr at d8450742ce3260d93a2346f4398a1e60d019a45b and dapr/kit at 6e5616aa.
// Two retry loops nest (pkg/api/http/directmessaging.go onDirectMessage, pkg/api/grpc/grpc.go):
//   - the outer one runs resiliency.EndpointPolicy(app): the retry policy that
//     spec.targets.apps.<app>.retry names, or, with no target for the app, the default policy
//     DefaultAppRetryPolicy, else DefaultRetryPolicy (resiliency.go getDefaultRetryPolicy); a
//     target without a retry (a timeout or a circuit breaker only) has no retries;
//   - the inner one (pkg/messaging/direct_messaging.go invokeWithRetry) runs the built-in policy
//     DaprBuiltInServiceRetries (3 retries, constant 1 s: 4 tries; on the sidecar-to-sidecar gRPC
//     codes Unavailable and Unauthenticated) only when resiliency.PolicyDefined(app) is false:
//     when no Resiliency targets the app. A default policy does not turn it off: the tries
//     multiply, (1 + default maxRetries) x 4. A Resiliency may redefine
//     DaprBuiltInServiceRetries; decodePolicies resets a maxRetries under 3 to 3.
//
// A sidecar merges every Resiliency of its namespace whose scopes list its app-id (none: all)
// into one set of named policies (FromConfigurations): a target may name a policy another
// Resiliency defines. When several define one name, the last loaded wins; the largest is
// counted (an upper bound). maxRetries is retries (tries = n + 1); -1, dapr/kit retry's
// DefaultConfig when unset, is unbounded: an error naming the field, which no cap can bound.
// A Resiliency Dapr cannot decode (a duration that is neither a whole number of milliseconds nor
// a Go duration, a policy other than constant or exponential) is skipped whole by Dapr: an error
// naming the field and the value here.
const (
	GroupDapr                    = "dapr.io"
	DaprEnabled                  = "dapr.io/enabled"
	DaprAppID                    = "dapr.io/app-id"
	DaprBuiltInServiceRetry      = "DaprBuiltInServiceRetries"
	DaprBuiltInRetries           = 3
	DaprDefaultAppRetry          = "DefaultAppRetryPolicy"
	DaprDefaultRetry             = "DefaultRetryPolicy"
	Dapr                    Kind = "Dapr"
)

type daprRetry struct {
	Policy      string `json:"policy"`
	Duration    string `json:"duration"`
	MaxInterval string `json:"maxInterval"`
	MaxRetries  *int64 `json:"maxRetries"`
}

type resiliency struct {
	header
	Scopes []string `json:"scopes"`
	Spec   struct {
		Policies struct {
			Timeouts map[string]string    `json:"timeouts"`
			Retries  map[string]daprRetry `json:"retries"`
		} `json:"policies"`
		Targets struct {
			Apps map[string]struct {
				Retry   string `json:"retry"`
				Timeout string `json:"timeout"`
			} `json:"apps"`
		} `json:"targets"`
	} `json:"spec"`
}

// daprDuration parses a duration as dapr/kit config.Decode and resiliency.parseDuration do: a
// whole number is milliseconds, else a Go duration ("5s").
func daprDuration(v string) error {
	_, err := daprParse(v)
	return err
}

// unboundedPolicy reports whether a retry policy's count has no bound, and how it reads.
func unboundedPolicy(p daprRetry) (string, bool) {
	switch {
	case p.MaxRetries == nil:
		return "unset (Dapr's default -1)", true
	case *p.MaxRetries < 0:
		return fmt.Sprint(*p.MaxRetries), true
	}
	return "", false
}

// addResiliency decodes a Resiliency; a value Dapr cannot decode, or a retry policy that a
// target of this object or Dapr's default names and that has no bound, is an error naming the
// field.
func (s *Set) addResiliency(key string, h header, decode func(any) error) error {
	r := &resiliency{}
	if err := decode(r); err != nil {
		return err
	}
	r.header = h
	for _, name := range sortedKeys(r.Spec.Policies.Timeouts) {
		if v := r.Spec.Policies.Timeouts[name]; daprDuration(v) != nil {
			return fmt.Errorf("%s spec.policies.timeouts.%s: %q is not a duration (a whole number of milliseconds or a Go duration such as 5s; Dapr skips this Resiliency)", h.id(), name, v)
		}
	}
	for _, name := range sortedKeys(r.Spec.Policies.Retries) {
		p := r.Spec.Policies.Retries[name]
		for _, f := range []struct{ field, v string }{{"duration", p.Duration}, {"maxInterval", p.MaxInterval}} {
			if f.v != "" && daprDuration(f.v) != nil {
				return fmt.Errorf("%s spec.policies.retries.%s.%s: %q is not a duration (a whole number of milliseconds or a Go duration such as 5s; Dapr skips this Resiliency)", h.id(), name, f.field, f.v)
			}
		}
		if pt := strings.ToLower(p.Policy); pt != "" && pt != "constant" && pt != "exponential" {
			return fmt.Errorf("%s spec.policies.retries.%s.policy: %q is neither constant nor exponential (Dapr skips this Resiliency)", h.id(), name, p.Policy)
		}
		if name == DaprDefaultAppRetry || name == DaprDefaultRetry {
			if v, ok := unboundedPolicy(p); ok {
				return fmt.Errorf("%s spec.policies.retries.%s.maxRetries: %s retries without bound (Dapr's default policy for every app no Resiliency targets): set a number", h.id(), name, v)
			}
		}
	}
	for _, app := range sortedKeys(r.Spec.Targets.Apps) {
		name := r.Spec.Targets.Apps[app].Retry
		p, ok := r.Spec.Policies.Retries[name]
		if name == "" || !ok {
			continue // another Resiliency may define it (daprEdge)
		}
		if v, ok := unboundedPolicy(p); ok && name != DaprBuiltInServiceRetry {
			return fmt.Errorf("%s spec.policies.retries.%s.maxRetries: %s retries without bound (target app %s): set a number", h.id(), name, v, app)
		}
	}
	s.resiliencies[key] = r
	return nil
}

// daprPolicy is the largest definition of the named retry policy in rs, as a layer.
func daprPolicy(rs []*resiliency, name, why string) (Layer, bool) {
	// why follows the count: " (replaces the built-in retries)".
	var best Layer
	for _, r := range rs {
		p, ok := r.Spec.Policies.Retries[name]
		if !ok {
			continue
		}
		l := Layer{Kind: Dapr, Object: r.id(), FieldPath: "spec.policies.retries." + name + ".maxRetries"}
		switch v, unbounded := unboundedPolicy(p); {
		case name == DaprBuiltInServiceRetry && (unbounded || *p.MaxRetries < DaprBuiltInRetries):
			l.Tries, l.Note = DaprBuiltInRetries+1, fmt.Sprintf("Dapr %s overrides %s: maxRetries %s, reset to Dapr's floor of %d", r.id(), name, v, DaprBuiltInRetries)
		case unbounded:
			// Named from another Resiliency (addResiliency refuses it within one): no count.
			l.Tries, l.Note = graph.Saturated, fmt.Sprintf("Dapr %s retry policy %s, maxRetries %s: retries without bound%s", r.id(), name, v, why)
		case name == DaprBuiltInServiceRetry:
			l.Tries, l.Note = tries(*p.MaxRetries), fmt.Sprintf("Dapr %s overrides %s: maxRetries %d", r.id(), name, *p.MaxRetries)
		default:
			l.Tries, l.Note = tries(*p.MaxRetries), fmt.Sprintf("Dapr %s retry policy %s, maxRetries %d%s", r.id(), name, *p.MaxRetries, why)
		}
		better(&best, l)
	}
	return best, best.Kind != ""
}

// daprEdge adds the Dapr layers of a call from c to the app ref.Name in c's namespace.
func (s *Set) daprEdge(e *Edge, c Caller, ref ServiceRef) {
	// Any case of "true", as Dapr's injector reads it (dapr/dapr pkg/injector/service/handler.go
	// podHasDaprEnabled: strings.EqualFold(..., "true")); before, "True" was out of Dapr.
	if !strings.EqualFold(c.Annotations[DaprEnabled], "true") {
		return
	}
	appID := c.Annotations[DaprAppID]
	var rs []*resiliency // the caller's sidecar's, in the order it loads them
	for _, k := range sortedKeys(s.resiliencies) {
		r := s.resiliencies[k]
		if r.Metadata.Namespace == c.Namespace && (len(r.Scopes) == 0 || slices.Contains(r.Scopes, appID)) {
			rs = append(rs, r)
		}
	}
	// A target for the app: its retry policy, the only loop (the built-in retries are off).
	if ref.Namespace == c.Namespace {
		var target Layer
		for _, r := range rs {
			t, ok := r.Spec.Targets.Apps[ref.Name]
			if !ok {
				continue
			}
			field := "spec.targets.apps." + ref.Name + ".retry"
			if t.Retry == "" {
				better(&target, Layer{Kind: Dapr, Object: r.id(), FieldPath: field, Tries: 1,
					Note: fmt.Sprintf("Dapr %s targets app %s with no retry policy: no retries (a target turns the built-in retries off)", r.id(), ref.Name)})
				continue
			}
			l, ok := daprPolicy(rs, t.Retry, " (replaces the built-in retries)")
			if !ok {
				l = Layer{Kind: Dapr, Object: r.id(), FieldPath: field, Tries: 1,
					Note: fmt.Sprintf("Dapr %s %s: %q, which no Resiliency of the caller defines: no retries (a target turns the built-in retries off)", r.id(), field, t.Retry)}
			}
			better(&target, l)
		}
		if target.Kind != "" {
			e.Layers = append(e.Layers, target)
			return
		}
	}
	// No target: the default policy, if any, around the built-in retries.
	for _, name := range []string{DaprDefaultAppRetry, DaprDefaultRetry} {
		if l, ok := daprPolicy(rs, name, " (Dapr's default for an app no Resiliency targets, "+ref.Name+": the built-in retries run inside each of its tries)"); ok {
			e.Layers = append(e.Layers, l)
			break
		}
	}
	builtIn, ok := daprPolicy(rs, DaprBuiltInServiceRetry, "")
	if !ok || builtIn.Tries == DaprBuiltInRetries+1 {
		// Dapr's own (or one reset to it): no object to lower.
		builtIn = Layer{Kind: Dapr, Tries: DaprBuiltInRetries + 1, Default: true,
			Note: fmt.Sprintf("Dapr built-in %s (%d retries), no Resiliency targets app %s", DaprBuiltInServiceRetry, DaprBuiltInRetries, ref.Name)}
	}
	e.Layers = append(e.Layers, builtIn)
}

// Dapr's backoff (dapr/kit retry/retry.go DefaultConfig, NewBackOff; cenkalti/backoff v4): a
// constant policy waits its duration (5 s unset; the built-in DaprBuiltInServiceRetries 1 s,
// resiliency.go addBuiltInPolicies); an exponential one starts at 500 ms times 1.5 and grows to
// maxInterval (60 s unset), each wait randomized by up to 0.5 of it, so at most 1.5 times.
const (
	daprBuiltInWait       = time.Second
	daprConstantWait      = 5 * time.Second
	daprExponentialFirst  = 750 * time.Millisecond // 500 ms x (1 + 0.5)
	daprExponentialMax    = 60 * time.Second
	daprRandomizedPercent = 150
)

// daprTime is a Dapr layer's time: the wait between its tries, as its retry policy sets it.
// Before, Envoy's 25-250 ms backoff was assumed: the built-in retries' 3 x 1 s read as 175 ms.
// A target's timeout bounds each try (resiliency.go EndpointPolicy, policy.go
// NewRunnerWithOptions wraps each attempt in context.WithTimeout): the layer names the policy,
// not the app, so the per-try bound is the longest timeout of the app targets of the policy's
// namespace that name it, and none when one of them has none (an upper bound).
func (s *Set) daprTime(l Layer) LayerTime {
	lt := LayerTime{BackoffBase: daprBuiltInWait, BackoffMax: daprBuiltInWait}
	if l.Object == "" {
		// The built-in retries: no object to name, so the time's source says what it is.
		lt.Source = "Dapr built-in " + DaprBuiltInServiceRetry + " (1s between tries)"
	}
	name, ok := strings.CutPrefix(l.FieldPath, "spec.policies.retries.")
	name, ok2 := strings.CutSuffix(name, ".maxRetries")
	if s == nil || l.Object == "" || !ok || !ok2 {
		return lt
	}
	for _, r := range s.resiliencies {
		p, found := r.Spec.Policies.Retries[name]
		if r.id() != l.Object || !found {
			continue
		}
		lt.Source = l.Object + " spec.policies.retries." + name
		lt.PerTry = s.daprTargetTimeout(r.Metadata.Namespace, name)
		if strings.EqualFold(p.Policy, "exponential") {
			lt.BackoffBase, lt.BackoffMax = daprExponentialFirst, daprExponentialMax*daprRandomizedPercent/100
			if d, err := daprParse(p.MaxInterval); err == nil && p.MaxInterval != "" {
				lt.BackoffMax = max(d*daprRandomizedPercent/100, lt.BackoffBase)
			}
			return lt
		}
		lt.BackoffBase = daprConstantWait
		if d, err := daprParse(p.Duration); err == nil && p.Duration != "" {
			lt.BackoffBase = d
		}
		lt.BackoffMax = lt.BackoffBase
		return lt
	}
	return lt
}

// daprParse is daprDuration's value.
func daprParse(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(v)
}

// daprTargetTimeout is the per-try bound of retry policy name for the app targets of namespace
// ns that name it: the longest of their timeouts (spec.policies.timeouts of any Resiliency of
// ns, the largest where several define it), 0 when one has none or none names the policy.
func (s *Set) daprTargetTimeout(ns, name string) time.Duration {
	var longest time.Duration
	named := false
	for _, r := range s.resiliencies {
		if r.Metadata.Namespace != ns {
			continue
		}
		for _, t := range r.Spec.Targets.Apps {
			if t.Retry != name {
				continue
			}
			named = true
			var d time.Duration
			for _, o := range s.resiliencies {
				if v, ok := o.Spec.Policies.Timeouts[t.Timeout]; ok && o.Metadata.Namespace == ns && t.Timeout != "" {
					if x, err := daprParse(v); err == nil {
						d = max(d, x)
					}
				}
			}
			if d <= 0 {
				return 0
			}
			longest = max(longest, d)
		}
	}
	if !named {
		return 0
	}
	return longest
}
