package mesh

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Dapr (dapr/dapr): a caller whose pod template has dapr.io/enabled "true" invokes other apps
// through its sidecar (service invocation, the callee named by its app-id: the upstream's name).
// How the retries combine, read from dapr/dapr pkg/messaging/direct_messaging.go
// (invokeWithRetry): when no Resiliency policy targets the callee app
// (resiliency.PolicyDefined(app.id, EndpointPolicy{}) false), the built-in policy
// DaprBuiltInServiceRetries runs (3 retries, constant 1 s: 4 tries; retried on the gRPC codes
// Unavailable and Unauthenticated of the sidecar-to-sidecar call); when one does, the built-in
// retries are not run and the target's policy is the only one: it REPLACES, not floors. A
// Resiliency may redefine DaprBuiltInServiceRetries (spec.policies.retries), which Dapr's docs
// say cannot go below the default: that override is floored at 3 retries.
//
// A Resiliency (dapr.io/v1alpha1) applies to the apps of its namespace that its scopes list
// (none: all). spec.targets.apps.<app-id>.retry names spec.policies.retries.<name>, whose
// maxRetries is retries (tries = n + 1); -1, Dapr's default when unset, is unbounded: an error
// naming the field, which no cap can bound.
const (
	GroupDapr                    = "dapr.io"
	DaprEnabled                  = "dapr.io/enabled"
	DaprAppID                    = "dapr.io/app-id"
	DaprBuiltInServiceRetry      = "DaprBuiltInServiceRetries"
	DaprBuiltInRetries           = 3
	Dapr                    Kind = "Dapr"
)

type daprRetry struct {
	MaxRetries *int64 `json:"maxRetries"`
	// Policy ("constant", the default, or "exponential") and Duration (the constant policy's
	// wait between tries, default 5s): the time model's (daprTime).
	Policy      *string `json:"policy"`
	Duration    *string `json:"duration"`
	MaxInterval *string `json:"maxInterval"`
}

// Dapr's waits between tries (docs.dapr.io, operations/resiliency/policies: "duration ...
// Defaults to 5s", policy "Defaults to constant"; override-default-retries: the built-in service
// retries wait "a backoff interval of 1 second"; dapr/dapr pkg/resiliency's
// TestBuiltInPoliciesAreCreated: MaxRetries 3, Duration time.Second).
const (
	DaprBuiltInBackoff      = time.Second
	DaprDefaultConstantWait = 5 * time.Second
)

// Dapr's exponential policy (docs.dapr.io operations/resiliency/policies: "BackOffDuration =
// PreviousBackOffDuration * (Random value from 0.5 to 1.5) * 1.5", capped at maxInterval,
// "Defaults to 60s"), from an initial 500ms (cenkalti/backoff's ExponentialBackOff, which
// dapr/kit's retry builds: DefaultInitialInterval 500ms, DefaultRandomizationFactor 0.5,
// DefaultMultiplier 1.5): the wait before retry n is at most 1.5 x min(500ms x 1.5^(n-1),
// maxInterval), which the model's min(max, base x 2^(n-1)) bounds with base 750ms and max 1.5 x
// maxInterval (an upper bound).
const (
	DaprExponentialInitial     = 500 * time.Millisecond
	DaprDefaultMaxInterval     = 60 * time.Second
	daprExponentialRandomScale = 1.5
)

// daprWait is a retry policy's waits as the model's backoff (base, max): a constant policy's
// duration for both; an exponential policy's bound (above).
func daprWait(id, name string, p daprRetry) (base, maxWait time.Duration, err error) {
	at := "spec.policies.retries." + name + "."
	if p.Policy != nil && *p.Policy == "exponential" {
		maxI := DaprDefaultMaxInterval
		if p.MaxInterval != nil {
			if maxI, err = parseTime(id, at+"maxInterval", p.MaxInterval, goPlainGrammar); err != nil {
				return 0, 0, err
			}
		}
		scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * daprExponentialRandomScale) }
		return scale(DaprExponentialInitial), max(scale(maxI), scale(DaprExponentialInitial)), nil
	}
	if p.Policy != nil && *p.Policy != "constant" {
		return 0, 0, fmt.Errorf("%s %spolicy: %q is not a Dapr retry policy (constant or exponential)", id, at, *p.Policy)
	}
	if p.Duration == nil {
		return DaprDefaultConstantWait, DaprDefaultConstantWait, nil
	}
	d, err := parseTime(id, at+"duration", p.Duration, goPlainGrammar)
	return d, d, err
}

// daprTime is the time of a Dapr layer: the built-in retries wait 1s between tries; a
// Resiliency's retry policy its constant duration, or its exponential bound.
func (s *Set) daprTime(l Layer) LayerTime {
	lt := LayerTime{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}
	if l.Object == "" {
		return LayerTime{BackoffBase: DaprBuiltInBackoff, BackoffMax: DaprBuiltInBackoff, Source: "Dapr built-in " + DaprBuiltInServiceRetry + " (1s between tries)"}
	}
	_, nsName, _ := strings.Cut(l.Object, " ")
	r := s.resiliencies[GroupDapr+"/Resiliency/"+nsName]
	name := strings.TrimSuffix(strings.TrimPrefix(l.FieldPath, "spec.policies.retries."), ".maxRetries")
	if r == nil {
		return lt
	}
	p, ok := r.Spec.Policies.Retries[name]
	if !ok {
		return lt
	}
	if b, m, err := daprWait(r.id(), name, p); err == nil {
		return LayerTime{BackoffBase: b, BackoffMax: m, Source: fmt.Sprintf("%s spec.policies.retries.%s", r.id(), name)}
	}
	return lt
}

type resiliency struct {
	header
	Scopes []string `json:"scopes"`
	Spec   struct {
		Policies struct {
			Retries map[string]daprRetry `json:"retries"`
		} `json:"policies"`
		Targets struct {
			Apps map[string]struct {
				Retry string `json:"retry"`
			} `json:"apps"`
		} `json:"targets"`
	} `json:"spec"`
}

// addResiliency decodes a Resiliency; a target naming a retry policy that is missing or
// unbounded is an error naming the field.
func (s *Set) addResiliency(key string, h header, decode func(any) error) error {
	r := &resiliency{}
	if err := decode(r); err != nil {
		return err
	}
	r.header = h
	for _, name := range sortedKeys(r.Spec.Policies.Retries) {
		if _, _, err := daprWait(h.id(), name, r.Spec.Policies.Retries[name]); err != nil {
			return err
		}
	}
	for _, app := range sortedKeys(r.Spec.Targets.Apps) {
		name := r.Spec.Targets.Apps[app].Retry
		if name == "" {
			continue
		}
		p, ok := r.Spec.Policies.Retries[name]
		if !ok {
			return fmt.Errorf("%s spec.targets.apps.%s.retry: %q is not in spec.policies.retries", h.id(), app, name)
		}
		if p.MaxRetries == nil || *p.MaxRetries < 0 {
			v := "unset (Dapr's default -1)"
			if p.MaxRetries != nil {
				v = fmt.Sprint(*p.MaxRetries)
			}
			return fmt.Errorf("%s spec.policies.retries.%s.maxRetries: %s retries without bound (target app %s): set a number", h.id(), name, v, app)
		}
	}
	s.resiliencies[key] = r
	return nil
}

// daprEdge adds the Dapr layer of a call from c to the app ref.Name in c's namespace.
func (s *Set) daprEdge(e *Edge, c Caller, ref ServiceRef) {
	// Any case of "true", as Dapr's injector reads it (dapr/dapr pkg/injector/service/handler.go
	// podHasDaprEnabled: strings.EqualFold(..., "true")); before, "True" was out of Dapr.
	if !strings.EqualFold(c.Annotations[DaprEnabled], "true") {
		return
	}
	appID := c.Annotations[DaprAppID]
	builtIn := Layer{Kind: Dapr, Tries: DaprBuiltInRetries + 1, Default: true,
		Note: fmt.Sprintf("Dapr built-in %s (%d retries), no Resiliency targets app %s", DaprBuiltInServiceRetry, DaprBuiltInRetries, ref.Name)}
	var target Layer
	for _, k := range sortedKeys(s.resiliencies) {
		r := s.resiliencies[k]
		if r.Metadata.Namespace != c.Namespace || len(r.Scopes) > 0 && !slices.Contains(r.Scopes, appID) {
			continue
		}
		if t, ok := r.Spec.Targets.Apps[ref.Name]; ok && t.Retry != "" && ref.Namespace == c.Namespace {
			n := *r.Spec.Policies.Retries[t.Retry].MaxRetries
			better(&target, Layer{Kind: Dapr, Object: r.id(), FieldPath: "spec.policies.retries." + t.Retry + ".maxRetries",
				Tries: tries(n), Note: fmt.Sprintf("Dapr %s retry policy %s, maxRetries %d (replaces the built-in retries)", r.id(), t.Retry, n)})
		}
		if p, ok := r.Spec.Policies.Retries[DaprBuiltInServiceRetry]; ok && p.MaxRetries != nil && *p.MaxRetries > DaprBuiltInRetries {
			better(&builtIn, Layer{Kind: Dapr, Object: r.id(), FieldPath: "spec.policies.retries." + DaprBuiltInServiceRetry + ".maxRetries",
				Tries: tries(*p.MaxRetries), Note: fmt.Sprintf("Dapr %s overrides %s: maxRetries %d", r.id(), DaprBuiltInServiceRetry, *p.MaxRetries)})
		}
	}
	if target.Kind != "" {
		e.Layers = append(e.Layers, target)
		return
	}
	e.Layers = append(e.Layers, builtIn)
}
