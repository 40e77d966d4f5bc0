package mesh

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

// The time side of the layers (DESIGN.md, "Time along the chain"): the timeouts and backoff each
// layer applies, read from the same objects as its tries. A Layer names its object and field;
// LayerTime finds that object's timeouts: for a route, those of the rule the layer came from.

// Linkerd's timeout annotations (2.16+), on a Service or a route, beside the retry ones.
const (
	LinkerdTimeoutRequest  = "timeout.linkerd.io/request"
	LinkerdTimeoutResponse = "timeout.linkerd.io/response"
	LinkerdRetryTimeout    = "retry.linkerd.io/timeout"
)

// Backoff the proxies use when nothing sets it: Envoy's (Istio's sidecar, Envoy Gateway, and so
// this model's choice for any Gateway API implementation) is fully jittered from a 25 ms base to
// ten times it; Linkerd's annotation-configured retries wait a jittered 25-250 ms.
const (
	EnvoyBackoffBase   = 25 * time.Millisecond
	EnvoyBackoffMax    = 250 * time.Millisecond
	LinkerdBackoffBase = 25 * time.Millisecond
	LinkerdBackoffMax  = 250 * time.Millisecond
)

// LayerTime is what a layer's object says about time. Zero durations are unset: no per-try
// timeout, no overall timeout.
type LayerTime struct {
	// PerTry bounds each try (Istio retries.perTryTimeout, Gateway API timeouts.backendRequest,
	// retry.linkerd.io/timeout, Envoy Gateway retry.perRetry.timeout).
	PerTry time.Duration
	// Timeout bounds the tries together (Istio timeout, Gateway API timeouts.request,
	// timeout.linkerd.io/request or /response, Envoy Gateway timeout.http.requestTimeout).
	Timeout time.Duration
	// BackoffBase and BackoffMax: the wait before retry n is at most min(max, base x 2^(n-1)).
	BackoffBase, BackoffMax time.Duration
	// Source says where the timeouts were read ("VirtualService shop/payment spec.http[0]"),
	// empty when nothing sets one.
	Source string
}

// ruleTime is one rule's (or a whole object's) timeouts.
type ruleTime struct {
	perTry, timeout, base, max time.Duration
	set                        bool
}

// objTimes are an object's timeouts: by rule (spec.http[i], spec.rules[i]) and for the whole
// object (annotations, a BackendTrafficPolicy).
type objTimes struct {
	rules []ruleTime
	whole ruleTime
}

// Decoding structs for the time fields alone, kept apart from the retry ones.
type vsTimeFields struct {
	Spec struct {
		HTTP []struct {
			Timeout *string `json:"timeout"`
			Retries *struct {
				PerTryTimeout *string `json:"perTryTimeout"`
			} `json:"retries"`
		} `json:"http"`
	} `json:"spec"`
}

type routeTimeFields struct {
	Spec struct {
		Rules []struct {
			Timeouts *struct {
				Request        *string `json:"request"`
				BackendRequest *string `json:"backendRequest"`
			} `json:"timeouts"`
			Retry *struct {
				Backoff *string `json:"backoff"`
			} `json:"retry"`
		} `json:"rules"`
	} `json:"spec"`
}

type btpTimeFields struct {
	Spec struct {
		Timeout *struct {
			HTTP *struct {
				RequestTimeout *string `json:"requestTimeout"`
			} `json:"http"`
		} `json:"timeout"`
		Retry *struct {
			PerRetry *struct {
				Timeout *string `json:"timeout"`
				BackOff *struct {
					BaseInterval *string `json:"baseInterval"`
					MaxInterval  *string `json:"maxInterval"`
				} `json:"backOff"`
			} `json:"perRetry"`
		} `json:"retry"`
	} `json:"spec"`
}

// parseTime reads a duration field: Go's form, which covers Istio's ("1s", "0.5s"), Gateway
// API's ("500ms", "1h30m") and Linkerd's. Nil is unset; "0s" is unset too (a disabled timeout,
// in Istio and Gateway API alike). Negative or malformed is an error naming the field and value.
func parseTime(id, field string, v *string) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(*v))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %s: %q is not a duration (\"500ms\", \"2s\")", id, field, *v)
	}
	return d, nil
}

// addTimes reads the time fields of an object being added (h, its Set key and JSON).
func (s *Set) addTimes(h header, key string, data []byte) error {
	var ot objTimes
	var err error
	field := func(f string, v *string, dst *time.Duration) {
		if err != nil {
			return
		}
		var d time.Duration
		if d, err = parseTime(h.id(), f, v); err == nil && d > 0 {
			*dst = d
		}
	}
	decode := func(v any) error {
		return decodeObject(h, data, v)
	}
	switch h.group() + "/" + h.Kind {
	case GroupIstio + "/VirtualService":
		var f vsTimeFields
		if err := decode(&f); err != nil {
			return err
		}
		ot.rules = make([]ruleTime, len(f.Spec.HTTP))
		for i, r := range f.Spec.HTTP {
			rt := &ot.rules[i]
			field(fmt.Sprintf("spec.http[%d].timeout", i), r.Timeout, &rt.timeout)
			if r.Retries != nil {
				field(fmt.Sprintf("spec.http[%d].retries.perTryTimeout", i), r.Retries.PerTryTimeout, &rt.perTry)
			}
			rt.set = rt.timeout > 0 || rt.perTry > 0
		}
	case GroupGateway + "/HTTPRoute", GroupGateway + "/GRPCRoute", GroupLinkerdPol + "/HTTPRoute":
		var f routeTimeFields
		if err := decode(&f); err != nil {
			return err
		}
		ot.rules = make([]ruleTime, len(f.Spec.Rules))
		for i, r := range f.Spec.Rules {
			rt := &ot.rules[i]
			if r.Timeouts != nil {
				field(fmt.Sprintf("spec.rules[%d].timeouts.request", i), r.Timeouts.Request, &rt.timeout)
				field(fmt.Sprintf("spec.rules[%d].timeouts.backendRequest", i), r.Timeouts.BackendRequest, &rt.perTry)
			}
			if r.Retry != nil {
				field(fmt.Sprintf("spec.rules[%d].retry.backoff", i), r.Retry.Backoff, &rt.base)
			}
			rt.set = rt.timeout > 0 || rt.perTry > 0 || rt.base > 0
		}
		ot.whole = linkerdTimes(h, field)
	case "/Service":
		ot.whole = linkerdTimes(h, field)
	case GroupEnvoyGateway + "/BackendTrafficPolicy":
		var f btpTimeFields
		if err := decode(&f); err != nil {
			return err
		}
		w := &ot.whole
		if t := f.Spec.Timeout; t != nil && t.HTTP != nil {
			field("spec.timeout.http.requestTimeout", t.HTTP.RequestTimeout, &w.timeout)
		}
		if r := f.Spec.Retry; r != nil && r.PerRetry != nil {
			field("spec.retry.perRetry.timeout", r.PerRetry.Timeout, &w.perTry)
			if b := r.PerRetry.BackOff; b != nil {
				field("spec.retry.perRetry.backOff.baseInterval", b.BaseInterval, &w.base)
				field("spec.retry.perRetry.backOff.maxInterval", b.MaxInterval, &w.max)
			}
		}
		w.set = w.timeout > 0 || w.perTry > 0 || w.base > 0 || w.max > 0
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if s.times == nil {
		s.times = map[string]objTimes{}
	}
	s.times[key] = ot
	return nil
}

// linkerdTimes reads Linkerd's timeout annotations: retry.linkerd.io/timeout is the per-try
// timeout; timeout.linkerd.io/request (or /response, the smaller when both are set) bounds the
// whole request, retries included.
func linkerdTimes(h header, field func(string, *string, *time.Duration)) ruleTime {
	var rt ruleTime
	get := func(k string) *string {
		if v, ok := h.Metadata.Annotations[k]; ok {
			return &v
		}
		return nil
	}
	field(annotationPath(LinkerdRetryTimeout), get(LinkerdRetryTimeout), &rt.perTry)
	var req, resp time.Duration
	field(annotationPath(LinkerdTimeoutRequest), get(LinkerdTimeoutRequest), &req)
	field(annotationPath(LinkerdTimeoutResponse), get(LinkerdTimeoutResponse), &resp)
	switch {
	case req > 0 && resp > 0:
		rt.timeout = min(req, resp)
	default:
		rt.timeout = max(req, resp)
	}
	rt.set = rt.perTry > 0 || rt.timeout > 0
	return rt
}

// objectKeys are the Set keys an object id ("HTTPRoute shop/web") can have.
func objectKeys(id string) []string {
	kind, nsName, ok := strings.Cut(id, " ")
	if !ok {
		return nil
	}
	switch kind {
	case "VirtualService":
		return []string{GroupIstio + "/" + kind + "/" + nsName}
	case "HTTPRoute":
		return []string{GroupGateway + "/" + kind + "/" + nsName, GroupLinkerdPol + "/" + kind + "/" + nsName}
	case "GRPCRoute":
		return []string{GroupGateway + "/" + kind + "/" + nsName}
	case "BackendTrafficPolicy":
		return []string{GroupEnvoyGateway + "/" + kind + "/" + nsName}
	case "Service":
		return []string{"/" + kind + "/" + nsName}
	}
	return nil
}

// ruleIndex is N of the first "[N]" in a field path ("spec.http[2].retries.attempts": 2).
func ruleIndex(fieldPath string) (int, bool) {
	i := strings.IndexByte(fieldPath, '[')
	j := strings.IndexByte(fieldPath, ']')
	if i < 0 || j < i {
		return 0, false
	}
	n, err := strconv.Atoi(fieldPath[i+1 : j])
	return n, err == nil
}

// LayerTime returns the timeouts and backoff of a layer, from the object and rule it names: a
// route layer takes its rule's timeouts, a Linkerd or Envoy Gateway layer its object's. Backoff
// is the proxy's default where the object sets none. A layer of a system default that no object
// declares has no timeout (Istio's default route has none).
func (s *Set) LayerTime(l Layer) LayerTime {
	var lt LayerTime
	switch l.Kind {
	case Linkerd:
		lt.BackoffBase, lt.BackoffMax = LinkerdBackoffBase, LinkerdBackoffMax
	default:
		lt.BackoffBase, lt.BackoffMax = EnvoyBackoffBase, EnvoyBackoffMax
	}
	if s == nil || l.Object == "" {
		return lt
	}
	var ot objTimes
	found := false
	for _, k := range objectKeys(l.Object) {
		if ot, found = s.times[k]; found {
			break
		}
	}
	if !found {
		return lt
	}
	// A Linkerd layer is the object's annotations; a route layer is its rule's.
	rt := ot.whole
	source := l.Object
	if i, ok := ruleIndex(l.FieldPath); ok && i < len(ot.rules) && l.Kind != Linkerd {
		rt = ot.rules[i]
		source = fmt.Sprintf("%s %s", l.Object, l.FieldPath[:strings.IndexByte(l.FieldPath, ']')+1])
	}
	if !rt.set {
		return lt
	}
	lt.PerTry, lt.Timeout, lt.Source = rt.perTry, rt.timeout, source
	if rt.base > 0 {
		lt.BackoffBase = rt.base
		// A base alone (Gateway API's retry.backoff): Envoy's cap, ten times the base.
		lt.BackoffMax = 10 * rt.base
	}
	if rt.max > 0 {
		lt.BackoffMax = max(rt.max, lt.BackoffBase)
	}
	return lt
}

// TimeLayer is l as the time model's layer: its tries with LayerTime's timeouts and backoff,
// named by its system and object ("Istio VirtualService shop/payment"; "Istio default" where no
// object declares it).
func (s *Set) TimeLayer(l Layer) graph.TimeLayer {
	lt := s.LayerTime(l)
	name := string(l.Kind) + " default"
	if l.Object != "" {
		name = string(l.Kind) + " " + l.Object
	}
	return graph.TimeLayer{Name: name, Tries: l.Tries, PerTry: lt.PerTry, Timeout: lt.Timeout, BackoffBase: lt.BackoffBase, BackoffMax: lt.BackoffMax}
}

// Hop is the time model's hop of an edge whose caller's own layer (its app, or retrycap's
// proxy) is own, with the mesh layers of e under it, in wire order.
func (s *Set) Hop(own graph.TimeLayer, e Edge) graph.Hop {
	h := make(graph.Hop, 0, 1+len(e.Layers))
	h = append(h, own)
	for _, l := range e.Layers {
		h = append(h, s.TimeLayer(l))
	}
	return h
}
