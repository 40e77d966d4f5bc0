package mesh

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
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
	LinkerdTimeoutIdle     = "timeout.linkerd.io/idle"
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
	// the smaller of retry.linkerd.io/timeout and timeout.linkerd.io/response, Envoy Gateway
	// retry.perRetry.timeout).
	PerTry time.Duration
	// LastTry bounds the last try where PerTry does not (graph.TimeLayer.LastTry): Linkerd's
	// proxy drops the retry timeout once no retry remains, leaving the response timeout, or
	// nothing (graph.Forever). 0: PerTry bounds every try.
	LastTry time.Duration
	// Timeout bounds the tries together (Istio timeout, Gateway API timeouts.request,
	// timeout.linkerd.io/request, Envoy Gateway timeout.http.requestTimeout).
	Timeout time.Duration
	// BackoffBase and BackoffMax: the wait before retry n is at most min(max, base x 2^(n-1)).
	BackoffBase, BackoffMax time.Duration
	// Delay is held once per request before the tries, outside the timeouts (Istio's
	// fault.delay, Envoy Gateway's spec.faultInjection.delay, fault.go): the longest of the
	// routes (or policies) that can take the layer's requests.
	Delay time.Duration
	// Source says where the timeouts were read ("VirtualService shop/payment spec.http[0]"),
	// then where the delay was ("VirtualService shop/payment spec.http[0].fault.delay.fixedDelay
	// 7s", "BackendTrafficPolicy shop/p spec.faultInjection.delay.fixedDelay 7s"), ", " between
	// them; empty when nothing sets one.
	Source string
}

// ruleTime is one rule's (or a whole object's) timeouts.
type ruleTime struct {
	perTry, last, timeout, base, max time.Duration
	set                              bool
	// timeoutSet: the route timeout is written (a Gateway API rule's timeouts.request, or its
	// backendRequest in its place; a BackendTrafficPolicy's requestTimeout), "0s" (none)
	// included: Envoy Gateway then sets it on the route instead of a policy's or Envoy's 15s.
	timeoutSet bool
	// noRetries: a VirtualService route whose retries set no attempts (or 0): Istio gives Envoy
	// no retry policy (retry.ConvertPolicy), and its per-try timeout and backoff with it, so
	// LayerTime reads none. perTryRaw is the per-try timeout as written, for the warning.
	noRetries bool
	perTryRaw string
	// delay is a VirtualService route's fault delay, scope the gateways it applies on
	// (routeScope): both apart from set, as LayerTime reads them apart.
	delay faultDelay
	scope []string
}

// objTimes are an object's timeouts: by rule (spec.http[i], spec.rules[i]) and for the whole
// object (annotations, a BackendTrafficPolicy).
type objTimes struct {
	rules []ruleTime
	whole ruleTime
	// ignored are the warnings for Linkerd timeout annotations Linkerd cannot parse: it ignores
	// them (no timeout), and so does the model (WarnLinkerdTimeoutIgnored).
	ignored []string
	// longest is, by gateway (routeScope), the first rule holding the longest fault delay of
	// the rules on it (delayIndex); nil when no rule holds one.
	longest map[string]int
}

// Decoding structs for the time fields alone, kept apart from the retry ones.
type vsTimeFields struct {
	Spec struct {
		Gateways []string `json:"gateways"`
		HTTP     []struct {
			Timeout *string `json:"timeout"`
			Retries *struct {
				Attempts      *int64  `json:"attempts"`
				PerTryTimeout *string `json:"perTryTimeout"`
				Backoff       *string `json:"backoff"`
			} `json:"retries"`
			faultFields
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

// grammar is the duration syntax a field's owner accepts: a value it would refuse is refused
// here too, so that retrycap never times a layer by a timeout the mesh does not apply (Linkerd
// ignores an annotation it cannot parse: "1m30s" there is no timeout at all, not 90s).
type grammar int

const (
	// goGrammar is Istio's: the CRD's CEL duration() reads Go's form ("1.5s", "1m30s"), and
	// Istio's validation wants whole milliseconds, at least 1ms ("0s": disabled).
	goGrammar grammar = iota
	// gatewayGrammar is Gateway API's Duration (GEP-2257), also Linkerd's HTTPRoute's and
	// Envoy Gateway's: ^([0-9]{1,5}(h|m|s|ms)){1,4}$, no fraction, no "us".
	gatewayGrammar
	// linkerdGrammar is Linkerd's annotation durations: one whole number and a unit ms, s, m,
	// h or d ("1d" is valid, "1m30s" and "1.5s" are not), or a bare "0".
	linkerdGrammar
	// goPlainGrammar is Linkerd's own HTTPRoute (policy.linkerd.io): its CRD's format duration,
	// read by the policy controller as Go's form ("1.5s", "500us"); its admission refuses a
	// negative one.
	goPlainGrammar
)

var gatewayDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

// parseTime reads a duration field in its owner's grammar. Nil is unset; zero is unset too (a
// disabled timeout, in Istio, Gateway API and Linkerd alike). A value the owner refuses is an
// error naming the object, the field and the value.
func parseTime(id, field string, v *string, g grammar) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	switch g {
	case gatewayGrammar:
		if !gatewayDuration.MatchString(*v) {
			return 0, fmt.Errorf("%s %s: %q is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms (\"500ms\", \"1h30m\")", id, field, *v)
		}
		d, err := time.ParseDuration(*v)
		if err != nil {
			return 0, fmt.Errorf("%s %s: %q: %w", id, field, *v, err)
		}
		return d, nil
	case goPlainGrammar:
		d, err := time.ParseDuration(*v)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s %s: %q is not a duration (\"500ms\", \"1m30s\")", id, field, *v)
		}
		return d, nil
	case linkerdGrammar:
		d, ok := parseLinkerdDuration(*v)
		if !ok {
			return 0, fmt.Errorf("%s %s: %q is not a Linkerd duration: a whole number and one unit ms, s, m, h or d (\"500ms\", \"90s\")", id, field, *v)
		}
		return d, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(*v))
	switch {
	case err != nil || d < 0:
		return 0, fmt.Errorf("%s %s: %q is not a duration (\"500ms\", \"2s\")", id, field, *v)
	case d == 0:
		// Istio's CRD (duration(self) >= duration('1ms')) and its webhook refuse a zero: the
		// object is never stored, so it disables nothing.
		return 0, fmt.Errorf("%s %s: %q is refused by Istio (at least 1ms): leave the field out for no timeout", id, field, *v)
	case d < time.Millisecond || d%time.Millisecond != 0:
		return 0, fmt.Errorf("%s %s: %q is not a whole number of milliseconds of at least 1ms, as Istio requires", id, field, *v)
	}
	return d, nil
}

// parseLinkerdDuration reads a duration as Linkerd's policy controller does: blanks around, a
// decimal magnitude (Rust's u64, so an optional "+"), then ms, s, m, h or d, or nothing for 0.
// Linkerd refuses a value whose milliseconds pass a u64; one that only passes a time.Duration
// is saturated here: a finite bound too long to count.
func parseLinkerdDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "+")
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return 0, false // past u64: Linkerd refuses it too
	}
	var unit time.Duration
	switch s[i:] {
	case "":
		if n != 0 {
			return 0, false
		}
		return 0, true
	case "ms":
		unit = time.Millisecond
	case "s":
		unit = time.Second
	case "m":
		unit = time.Minute
	case "h":
		unit = time.Hour
	case "d":
		unit = 24 * time.Hour
	default:
		return 0, false
	}
	if n > math.MaxUint64/uint64(unit/time.Millisecond) {
		return 0, false // Linkerd: "overflows when converted to 'ms'"
	}
	if n > uint64(math.MaxInt64/int64(unit)) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(n) * unit, true
}

// addTimes reads the time fields of an object being added (h, its Set key and JSON).
func (s *Set) addTimes(h header, key string, data []byte) error {
	var ot objTimes
	var err error
	g := goGrammar
	switch h.group() {
	case GroupIstio:
	case GroupLinkerdPol:
		g = goPlainGrammar
	default:
		g = gatewayGrammar // Gateway API's routes, Envoy Gateway's policy
	}
	field := func(f string, v *string, dst *time.Duration) {
		if err != nil {
			return
		}
		var d time.Duration
		if d, err = parseTime(h.id(), f, v, g); err == nil && d > 0 {
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
				// Istio's backoff is Envoy's base interval; Envoy caps it at ten times that.
				field(fmt.Sprintf("spec.http[%d].retries.backoff", i), r.Retries.Backoff, &rt.base)
				if a := r.Retries.Attempts; a == nil || *a <= 0 {
					// (Istio's validation refuses a per-try timeout there; the retry side reads
					// 1 try.) Lowered flips it when it lowers attempts to 0.
					rt.noRetries = true
				}
				if r.Retries.PerTryTimeout != nil {
					rt.perTryRaw = *r.Retries.PerTryTimeout
				}
			}
			rt.set = rt.timeout > 0 || rt.perTry > 0 || rt.base > 0
			if err == nil {
				rt.delay, err = readFaultDelay(h.id(), i, &r.faultFields)
				rt.scope = routeScope(f.Spec.Gateways, &r.faultFields)
			}
		}
	case GroupGateway + "/HTTPRoute", GroupGateway + "/GRPCRoute", GroupLinkerdPol + "/HTTPRoute":
		var f routeTimeFields
		if err := decode(&f); err != nil {
			return err
		}
		ot.rules = make([]ruleTime, len(f.Spec.Rules))
		for i, r := range f.Spec.Rules {
			rt := &ot.rules[i]
			if r.Timeouts != nil && h.Kind == "GRPCRoute" {
				// Not a field of the Gateway API's GRPCRoute (v1.x): kubectl refuses it as unknown,
				// the API server drops it otherwise, and no implementation applies it.
				return fmt.Errorf("%s spec.rules[%d].timeouts: the Gateway API's GRPCRoute has no timeouts field (the API server drops it): bound the calls with an Envoy Gateway BackendTrafficPolicy, a VirtualService or the callers' per-try timeouts", h.id(), i)
			}
			if r.Timeouts != nil {
				field(fmt.Sprintf("spec.rules[%d].timeouts.request", i), r.Timeouts.Request, &rt.timeout)
				field(fmt.Sprintf("spec.rules[%d].timeouts.backendRequest", i), r.Timeouts.BackendRequest, &rt.perTry)
				if err == nil && rt.timeout > 0 && rt.perTry > rt.timeout {
					// The CRD's rule (and Linkerd's admission): the object is never stored.
					err = fmt.Errorf("%s spec.rules[%d].timeouts: backendRequest %q is longer than request %q, which the API server refuses (backendRequest is each try, request all of them)",
						h.id(), i, *r.Timeouts.BackendRequest, *r.Timeouts.Request)
				}
				rt.timeoutSet = r.Timeouts.Request != nil || r.Retry == nil && r.Timeouts.BackendRequest != nil
				if r.Retry == nil && rt.perTry > 0 {
					// No retry block: Istio (pilot's gateway conversion) and Envoy Gateway
					// (processRouteTimeout) make backendRequest the route's timeout, in place of
					// request, and the mesh's default tries run under it with no per-try bound.
					rt.timeout, rt.perTry = rt.perTry, 0
				}
			}
			if r.Retry != nil {
				field(fmt.Sprintf("spec.rules[%d].retry.backoff", i), r.Retry.Backoff, &rt.base)
			}
			rt.set = rt.timeout > 0 || rt.perTry > 0 || rt.base > 0
		}
		ot.whole, ot.ignored = linkerdTimes(h)
	case "/Service":
		ot.whole, ot.ignored = linkerdTimes(h)
	case GroupEnvoyGateway + "/BackendTrafficPolicy":
		var f btpTimeFields
		if err := decode(&f); err != nil {
			return err
		}
		w := &ot.whole
		if t := f.Spec.Timeout; t != nil && t.HTTP != nil {
			field("spec.timeout.http.requestTimeout", t.HTTP.RequestTimeout, &w.timeout)
			w.timeoutSet = t.HTTP.RequestTimeout != nil
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
	ot.longest = delayIndex(ot.rules)
	s.times[key] = ot
	return nil
}

// linkerdTimes reads Linkerd's timeout annotations as its proxy applies them (linkerd2-proxy's
// route extensions and stream timeouts, enforced on each attempt):
//   - timeout.linkerd.io/request bounds the whole request, retries included (one deadline);
//   - timeout.linkerd.io/response bounds each try, the last one included;
//   - retry.linkerd.io/timeout bounds each try but the last: the proxy drops it once no retry
//     remains, so the last try has only the response timeout, or nothing;
//   - timeout.linkerd.io/idle bounds no try that keeps its stream busy: not counted, but read,
//     since Linkerd drops request, response and idle together when one of them does not parse.
//
// Annotations are validated by no API server: Linkerd's policy controller logs one it cannot
// parse and goes on without it, and so does the model, with a warning (warns).
func linkerdTimes(h header) (rt ruleTime, warns []string) {
	read := func(k string, all bool) (time.Duration, bool) {
		v, ok := h.Metadata.Annotations[k]
		if !ok {
			return 0, true
		}
		d, err := parseTime(h.id(), annotationPath(k), &v, linkerdGrammar)
		if err != nil {
			if all {
				warns = append(warns, WarnLinkerdTimeoutsIgnored(err))
			} else {
				warns = append(warns, WarnLinkerdTimeoutIgnored(err))
			}
			return 0, false
		}
		if d == 0 && all {
			// The policy controller passes a zero request, response or idle timeout on (only
			// retry.linkerd.io/timeout's is dropped), and the proxy's deadline is then now.
			warns = append(warns, WarnLinkerdZeroTimeout(h.id(), k, v))
		}
		return d, true
	}
	retry, _ := read(LinkerdRetryTimeout, false)
	req, okReq := read(LinkerdTimeoutRequest, true)
	resp, okResp := read(LinkerdTimeoutResponse, true)
	_, okIdle := read(LinkerdTimeoutIdle, true)
	if !okReq || !okResp || !okIdle {
		req, resp = 0, 0
	}
	rt.timeout = req
	switch {
	case retry > 0 && resp > 0:
		rt.perTry = min(retry, resp)
		if resp > retry {
			rt.last = resp
		}
	case retry > 0:
		rt.perTry, rt.last = retry, graph.Forever
	default:
		rt.perTry = resp
	}
	rt.set = rt.perTry > 0 || rt.timeout > 0
	return rt, warns
}

// WarnLinkerdTimeoutIgnored: a Linkerd timeout annotation Linkerd cannot parse (err names the
// object, the annotation and the value), which it ignores.
func WarnLinkerdTimeoutIgnored(err error) string {
	return err.Error() + ": Linkerd ignores it: counted as no timeout"
}

// WarnLinkerdZeroTimeout: a zero timeout.linkerd.io annotation, which Linkerd does not read as
// "no timeout".
func WarnLinkerdZeroTimeout(id, key, value string) string {
	return fmt.Sprintf("%s %s: %q is a zero timeout, which Linkerd's proxy enforces (every request fails at once), not \"none\": leave the annotation out for no timeout; counted as no timeout", id, annotationPath(key), value)
}

// WarnLinkerdTimeoutsIgnored: a timeout.linkerd.io annotation Linkerd cannot parse, which makes it
// ignore the object's request, response and idle timeouts alike.
func WarnLinkerdTimeoutsIgnored(err error) string {
	return err.Error() + ": Linkerd ignores it, and " + LinkerdTimeoutRequest + ", /response and /idle with it: counted as no timeout"
}

// ignoredTimes are the warnings of object id's (a layer's Object) ignored timeouts.
func (s *Set) ignoredTimes(id string) []string {
	for _, k := range objectKeys(id) {
		if ot, ok := s.times[k]; ok {
			out := ot.ignored
			for i, rt := range ot.rules {
				if rt.noRetries && rt.perTry > 0 {
					out = append(out[:len(out):len(out)], WarnIstioPerTryWithoutRetries(id, i, rt.perTryRaw))
				}
				if rt.delay.d > 0 && slices.Contains(rt.scope, "mesh") {
					// The callers of these warnings are sidecars' edges.
					out = append(out[:len(out):len(out)], WarnIstioFaultDelay(id, rt.delay.field))
				}
			}
			return out
		}
	}
	return nil
}

// WarnIstioPerTryWithoutRetries: a VirtualService route's per-try timeout where its retries set
// no attempts: Istio gives Envoy no retry policy, so no per-try timeout either.
func WarnIstioPerTryWithoutRetries(id string, i int, perTry string) string {
	return fmt.Sprintf("%s spec.http[%d].retries.perTryTimeout: %q with no retries (attempts 0 or unset): Istio drops the retry policy and the per-try timeout with it: counted as no per-try timeout", id, i, perTry)
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
// declares has no timeout (Istio's default route has none). A VirtualService layer's delay is
// the longest fault delay of the object's routes that can take its requests (fault.go).
func (s *Set) LayerTime(l Layer) LayerTime {
	lt := s.layerTimeouts(l)
	if d, src := s.layerDelay(l); d > 0 {
		lt.Delay = d
		if lt.Source != "" {
			src = lt.Source + ", " + src
		}
		lt.Source = src
	}
	return lt
}

// layerDelay is the fault delay of a layer, with the object and field that set it: a
// VirtualService's route's (Istio), or the BackendTrafficPolicies' covering an entry route
// (Envoy Gateway, fault.go gatewayLayerDelay).
func (s *Set) layerDelay(l Layer) (time.Duration, string) {
	if s == nil {
		return 0, ""
	}
	if l.Kind == Gateway || l.Kind == EnvoyGateway {
		return s.gatewayLayerDelay(l)
	}
	if !strings.HasPrefix(l.Object, "VirtualService ") {
		return 0, ""
	}
	ot, ok := s.times[objectKeys(l.Object)[0]]
	i, okRule := ruleIndex(l.FieldPath)
	if !ok || !okRule || i >= len(ot.rules) {
		return 0, ""
	}
	d, field := delayOf(&ot, i)
	return d, l.Object + " " + field
}

// layerTimeouts is LayerTime without the delay.
func (s *Set) layerTimeouts(l Layer) LayerTime {
	lt := s.layerTime(l)
	if s == nil || l.Kind != Istio {
		return lt
	}
	// Istio's MeshConfig retry policies bring their per-try timeout and backoff with their tries
	// (pilot: a route that sets no retries takes defaultHttpRetryPolicy whole; the inbound
	// policy honours attempts, retryOn and backoff).
	var md *meshDefault
	switch {
	case l.Default:
		md = s.meshDefault
	case s.inbound != nil && l.Object == s.inbound.object:
		md = s.inbound
	}
	if md == nil {
		return lt
	}
	if lt.PerTry == 0 && md.perTry > 0 {
		lt.PerTry = md.perTry
	}
	if md.base > 0 {
		lt.BackoffBase, lt.BackoffMax = md.base, 10*md.base
	}
	if (md.perTry > 0 || md.base > 0) && lt.Source == "" {
		lt.Source = md.object + " data." + IstioConfigKey
	}
	return lt
}

// EnvoyDefaultRouteTimeout is Envoy's route timeout when its route config sets none
// (envoyproxy/envoy source/common/router/config_impl.h DEFAULT_ROUTE_TIMEOUT_MS = 15000, read
// by config_impl.cc PROTOBUF_GET_MS_OR_DEFAULT(route.route(), timeout, ...)); Istio always sets
// one (0, none: route.go setTimeout), Envoy Gateway only when a rule or a BackendTrafficPolicy
// does (envoyproxy/gateway internal/xds/translator/route.go getEffectiveRequestTimeout).
const EnvoyDefaultRouteTimeout = 15 * time.Second

// envoyGatewayTimeout is the route timeout of an entry layer l (a Gateway-parented rule's, or a
// BackendTrafficPolicy's retry) where Envoy Gateway serves the route, which the model knows by a
// BackendTrafficPolicy covering it (one targeting the route, else one of its parent Gateways',
// retry or not: envoyproxy/gateway d32f28294245 internal/gatewayapi/backendtrafficpolicy.go
// applies a Gateway's policy to a route only where the route's own sets no traffic features):
// the rule's timeouts.request (or backendRequest without retry) first, then the policy's
// timeout.http.requestTimeout, then Envoy's 15s (internal/xds/translator/route.go:118-123 and
// :442-456 getEffectiveRequestTimeout: "gateway-api timeout takes precedence";
// internal/gatewayapi/route.go:1086-1106 processRouteTimeout). For a policy's layer, the longest
// over the rules it serves (the layer does not say which). ok is false where no policy covers
// the route (another implementation: the rule's own timeouts, read already).
func (s *Set) envoyGatewayTimeout(l Layer) (timeout time.Duration, source string, ok bool) {
	x := s.index()
	ruleTimeout := func(r *route, i int) (time.Duration, string, bool) {
		if s.istioGatewayParent(r) != "" {
			return 0, "", false // Istio's gateway: no default route timeout
		}
		t, src, found := s.policyTimeout(x, r)
		if !found {
			return 0, "", false
		}
		if ot, has := s.times[GroupGateway+"/"+r.Kind+"/"+r.Metadata.Namespace+"/"+r.Metadata.Name]; has && i < len(ot.rules) && ot.rules[i].timeoutSet {
			return ot.rules[i].timeout, fmt.Sprintf("%s spec.rules[%d]", r.id(), i), true
		}
		return t, src, true
	}
	switch l.Kind {
	case Gateway:
		kind, nsName, _ := strings.Cut(l.Object, " ")
		r := s.routes[GroupGateway+"/"+kind+"/"+nsName]
		i, okRule := ruleIndex(l.FieldPath)
		if r == nil || !okRule || i >= len(r.Spec.Rules) {
			return 0, "", false
		}
		return ruleTimeout(r, i)
	case EnvoyGateway:
		backends := slices.Collect(maps.Keys(x.gatewayRoutes))
		slices.SortFunc(backends, func(a, b ServiceRef) int { return strings.Compare(a.String(), b.String()) })
		seen := map[*route]bool{}
		for _, b := range backends {
			for _, r := range x.gatewayRoutes[b] {
				if seen[r] {
					continue
				}
				seen[r] = true
				for i := range r.Spec.Rules {
					if _, own := gammaRule(r, i); own || s.policyLayer(x, r, i).Object != l.Object {
						continue
					}
					t, src, found := ruleTimeout(r, i)
					if !found {
						continue
					}
					if !ok || timeout != 0 && (t == 0 || t > timeout) {
						timeout, source, ok = t, src, true
					}
				}
			}
		}
	}
	return timeout, source, ok
}

// policyTimeout is the route timeout Envoy Gateway gives route r from its BackendTrafficPolicies
// where r's rule sets none, with the object that sets it; ok is false when no policy covers r.
// A policy targeting r wins over its Gateways' (a route's policy replaces a Gateway's whole,
// envoyproxy/gateway backendtrafficpolicy.go translateBackendTrafficPolicyForGateway skips a
// route with traffic features already set), and its requestTimeout, else Envoy's 15s; where it
// sets none and a Gateway's does, the longer of the two (the policies' mergeType, not read,
// merges them: translateBackendTrafficPolicyForRouteWithMerge). Of several policies, the
// longest (none the longest): an upper bound of the one Envoy Gateway takes.
func (s *Set) policyTimeout(x *index, r *route) (timeout time.Duration, source string, ok bool) {
	longer := func(t time.Duration, src string) {
		if !ok || timeout != 0 && (t == 0 || t > timeout) {
			timeout, source, ok = t, src, true
		}
	}
	var gws []*backendTrafficPolicy
	for _, pr := range r.Spec.ParentRefs {
		if pr.isGateway() {
			gws = append(gws, x.policies["Gateway/"+pr.namespaceOr(r.Metadata.Namespace)+"/"+pr.Name]...)
		}
	}
	// each is a policy's requestTimeout, else (unset) what stands in for it: fallback.
	each := func(ps []*backendTrafficPolicy, fallback func()) {
		for _, p := range ps {
			if w := s.times[GroupEnvoyGateway+"/BackendTrafficPolicy/"+p.Metadata.Namespace+"/"+p.Metadata.Name].whole; w.timeoutSet {
				longer(w.timeout, p.id()+" spec.timeout.http.requestTimeout")
			} else {
				fallback()
			}
		}
	}
	envoyDefault := func(p *backendTrafficPolicy) func() {
		return func() {
			longer(EnvoyDefaultRouteTimeout, fmt.Sprintf("Envoy's default route timeout 15s (%s and %s set none)", p.id(), r.id()))
		}
	}
	own := x.policies[r.Kind+"/"+r.Metadata.Namespace+"/"+r.Metadata.Name]
	if len(own) == 0 {
		for _, p := range gws {
			each([]*backendTrafficPolicy{p}, envoyDefault(p))
		}
		return timeout, source, ok
	}
	for _, p := range own {
		each([]*backendTrafficPolicy{p}, func() {
			envoyDefault(p)()
			each(gws, func() {})
		})
	}
	return timeout, source, ok
}

// layerTime is LayerTime from the layer's own object and rule.
func (s *Set) layerTime(l Layer) LayerTime {
	lt := s.layerTimeOwn(l)
	if s == nil || l.Kind != Gateway && l.Kind != EnvoyGateway {
		return lt
	}
	if t, src, ok := s.envoyGatewayTimeout(l); ok {
		lt.Timeout = t
		if lt.Source == "" {
			lt.Source = src
		} else if !strings.HasPrefix(src, lt.Source) {
			lt.Source += ", " + src
		}
	}
	return lt
}

// layerTimeOwn is LayerTime from the layer's own object and rule alone.
func (s *Set) layerTimeOwn(l Layer) LayerTime {
	var lt LayerTime
	switch l.Kind {
	case Kuma:
		return s.kumaTime(l) // kuma.go
	case Linkerd:
		lt.BackoffBase, lt.BackoffMax = LinkerdBackoffBase, LinkerdBackoffMax
	case IngressNginx:
		// nginx passes the request to the next server at once: no backoff. Its timeouts are
		// the Ingress's annotations over its controller's ConfigMap over NewDefault's.
		return s.ingressNginxTime(l)
	case Ingress:
		// Another controller's: not modelled, and so no timeouts.
	case Dapr:
		// Dapr's runner waits by its retry policy, not Envoy's backoff (dapr.go daprTime).
		return s.daprTime(l)
	case Consul:
		// Envoy's backoff; the destination's requestTimeout over all tries (consul.go).
		return s.consulTime(l)
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
	if l.NoRuleTimes {
		// Linkerd serving a Gateway API rule (policy controller, convert_gateway_rule): the
		// route's timeout.linkerd.io/request, else the rule's timeouts.request; no
		// backendRequest, no retry.backoff; its response timeout bounds every try, its retry
		// timeout not the last (so not counted here: the tries are the rule's, an upper bound).
		w := ot.whole
		req := rt.timeout
		if w.timeout > 0 {
			req = w.timeout
		}
		rt = ruleTime{timeout: req}
		switch {
		case w.last == 0:
			rt.perTry = w.perTry
		case w.last != graph.Forever:
			rt.perTry = w.last
		}
		rt.set = rt.timeout > 0 || rt.perTry > 0
		lt.BackoffBase, lt.BackoffMax = LinkerdBackoffBase, LinkerdBackoffMax
	}
	if !rt.set {
		return lt
	}
	if rt.noRetries {
		rt.perTry, rt.base = 0, 0
	}
	lt.PerTry, lt.LastTry, lt.Timeout, lt.Source = rt.perTry, rt.last, rt.timeout, source
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
	return graph.TimeLayer{Name: name, Tries: l.Tries, PerTry: lt.PerTry, LastTry: lt.LastTry, Timeout: lt.Timeout, BackoffBase: lt.BackoffBase, BackoffMax: lt.BackoffMax, Delay: lt.Delay}
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

// maxHops bounds the hops Hops returns for one edge: beyond it the layers with alternatives are
// each taken as their envelope (envelope), an upper bound of every one of them.
const maxHops = 64

// Hops are the hops one call can take, for the graph to take the worst of (graph.Timing.AddHop):
// Hop(own, e), and the same with each layer replaced by each other route of its object that
// takes the same requests (timeAlternatives), every combination. The mesh counts the route of
// the most tries, but which route a request takes depends on its path and headers, which the
// model does not know, and a route of fewer tries can wait longer (a VirtualService route of 4
// tries within a 1s timeout beside a route of 2 tries with none: 2 x the callee's time, not 1s).
// Before, the time was the counted route's alone.
func (s *Set) Hops(own graph.TimeLayer, e Edge) []graph.Hop {
	return s.hops(own, e, s.timeAlternatives)
}

// CallHops is Hops for e = Edge(c, callee): a Linkerd layer's alternatives depend on the caller
// and the callee too (linkerdAlternatives), every other layer's on itself alone.
func (s *Set) CallHops(own graph.TimeLayer, c Caller, callee string, e Edge) []graph.Hop {
	return s.hops(own, e, func(l Layer) []Layer {
		if l.Kind == Linkerd || l.NoRuleTimes { // NoRuleTimes: a Gateway API rule Linkerd serves
			return s.linkerdAlternatives(c, callee, l)
		}
		return s.timeAlternatives(l)
	})
}

// linkerdAlternatives are the layers Linkerd may apply in l's place on c's calls to callee, as
// linkerdEdge weighs them (none unless l gives one route's tries): each route's (LinkerdRoutes)
// tries with the timeouts that bound them (LinkerdRoute.Times), which replace l's own: a route
// without timeout annotations takes the Service's, and l, read as its own object's, was timed
// without any (unbounded: a route of limit 3 under a Service of timeout.linkerd.io/response 1s
// was 3 x the callee's time, not 3 x 1s). Each route has its own timeouts: a route of fewer
// tries may wait longer.
func (s *Set) linkerdAlternatives(c Caller, callee string, l Layer) []Layer {
	if s == nil || strings.HasPrefix(l.Object, "ServiceProfile ") {
		return nil
	}
	routes := s.LinkerdRoutes(c, callee)
	out := make([]Layer, 0, len(routes))
	found := false
	for _, rt := range routes {
		found = found || rt.Tries == l
		out = append(out, rt.Times)
	}
	if !found {
		return nil
	}
	return out
}

// LinkerdRoute is one route Linkerd may apply to a call (Set.LinkerdRoutes): Route names it
// ("HTTPRoute shop/b-fast"; a Gateway API rule Linkerd serves, "HTTPRoute shop/b spec.rules[0]"),
// Tries is the layer that gives its tries (the route's retry annotations, else the Service's,
// else Linkerd's 1 try), Times the layer whose object's timeouts bound them (Tries itself where
// the same object gives both): Linkerd takes a route's retry and its timeouts apart.
type LinkerdRoute struct {
	Route        string
	Tries, Times Layer
}

// LinkerdRoutes are the routes Linkerd may apply to c's calls to callee: each route attached to
// the Service, with its own retry annotations, else the Service's (or none: 1 try), and each
// Gateway API rule with a retry, in the order linkerdEdge weighs them; none for a callee outside
// the cluster, and none under a ServiceProfile (which makes Linkerd ignore the annotations). The
// mesh gate compares a route's Times before and after a change (the time model counts each).
func (s *Set) LinkerdRoutes(c Caller, callee string) []LinkerdRoute {
	if s == nil {
		return nil
	}
	ref, inCluster := resolve(callee, c.Namespace)
	if !inCluster {
		return nil
	}
	x := s.index()
	for _, p := range x.profiles[ref] {
		if p.Metadata.Namespace == ref.Namespace || p.Metadata.Namespace == c.Namespace {
			return nil
		}
	}
	var scratch Edge // linkerdLayer's warnings: the edge has them already
	svcID := "Service " + ref.String()
	svcCfg, _ := linkerdRetries(s.services[ref].Annotations, svcID)
	name := ref.Name
	if ref.Namespace != c.Namespace {
		name = ref.String()
	}
	svcTimes := s.times["/Service/"+ref.Namespace+"/"+ref.Name].whole.set
	var out []LinkerdRoute
	for _, r := range x.routesByService[ref] {
		if !routeApplies(r, ref, c.Namespace) || !attachesTo(r, ref, 0) {
			continue
		}
		cfg, _ := linkerdRetries(r.Metadata.Annotations, r.id())
		var l Layer
		switch {
		case cfg.set:
			l = s.linkerdLayer(&scratch, r.id(), cfg)
		case svcCfg.set:
			l = s.linkerdLayer(&scratch, svcID, svcCfg)
		default:
			l = Layer{Kind: Linkerd, Tries: 1, Default: true, Note: "Linkerd default, no retry annotations for " + name}
		}
		// Linkerd takes a rule's retry and its timeouts apart, each from the route, else from
		// the Service (linkerd/linkerd2 b24cd4059841 policy-controller/grpc/src/outbound/
		// http.rs:248-253: "if timeouts == Default::default() { timeouts = service_timeouts }",
		// "if retry.is_none() { retry = service_retry }"; policy-test outbound_api_http.rs
		// parent_retries_and_timeouts): the layer's tries with the timeouts of the object that
		// gives them, as a layer of that object for LayerTime (an alternative for time only).
		routeTimes := s.times[r.group()+"/"+r.Kind+"/"+r.Metadata.Namespace+"/"+r.Metadata.Name].whole.set
		timesFrom := ""
		switch {
		case routeTimes && l.Object != r.id():
			timesFrom = r.id()
		case !routeTimes && svcTimes && l.Object != svcID:
			timesFrom = svcID
		}
		t := l
		if timesFrom != "" {
			t.Object, t.FieldPath, t.Note = timesFrom, "", "timing: "+timesFrom+"'s timeouts"
		}
		out = append(out, LinkerdRoute{Route: r.id(), Tries: l, Times: t})
		if r.group() != GroupGateway {
			continue
		}
		for i := range r.Spec.Rules {
			if gl, ok := gammaRule(r, i); ok {
				gl.Unset, gl.NoRuleTimes = 1, true
				out = append(out, LinkerdRoute{Route: fmt.Sprintf("%s spec.rules[%d]", r.id(), i), Tries: gl, Times: gl})
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	// No route: the Service's default route, its retry annotations' tries (else 1) within its
	// timeout annotations, which Linkerd applies without any retry annotation too.
	l := Layer{Kind: Linkerd, Tries: 1, Default: true, Note: "Linkerd default, no retry annotations for " + name}
	if svcCfg.set {
		l = s.linkerdLayer(&scratch, svcID, svcCfg)
	}
	t := l
	if svcTimes && l.Object != svcID {
		t.Object, t.FieldPath, t.Note = svcID, "", "timing: "+svcID+"'s timeouts"
	}
	return []LinkerdRoute{{Route: svcID, Tries: l, Times: t}}
}

// LinkerdTimeoutAnnotations are the Linkerd timeout annotations (retry.linkerd.io/timeout,
// timeout.linkerd.io/request, /response, /idle) of object id ("Service shop/b", "HTTPRoute
// shop/b-fast") as the Set holds it, for the mesh gate to name the ones a change raised.
func (s *Set) LinkerdTimeoutAnnotations(id string) map[string]string {
	if s == nil {
		return nil
	}
	var anns map[string]string
	kind, nsName, _ := strings.Cut(id, " ")
	if kind == "Service" {
		ns, name, _ := strings.Cut(nsName, "/")
		anns = s.services[ServiceRef{Namespace: ns, Name: name}].Annotations
	} else {
		for _, k := range objectKeys(id) {
			if r := s.routes[k]; r != nil {
				anns = r.Metadata.Annotations
				break
			}
		}
	}
	out := map[string]string{}
	for _, k := range []string{LinkerdRetryTimeout, LinkerdTimeoutRequest, LinkerdTimeoutResponse, LinkerdTimeoutIdle} {
		if v, ok := anns[k]; ok {
			out[k] = v
		}
	}
	return out
}

func (s *Set) hops(own graph.TimeLayer, e Edge, alternatives func(Layer) []Layer) []graph.Hop {
	base := s.Hop(own, e)
	choices := make([][]graph.TimeLayer, len(e.Layers))
	n := 1
	for i, l := range e.Layers {
		alts := alternatives(l)
		if len(alts) == 0 {
			choices[i] = []graph.TimeLayer{base[i+1]}
		}
		for _, a := range alts {
			if tl := s.TimeLayer(a); !slices.Contains(choices[i], tl) {
				choices[i] = append(choices[i], tl)
			}
		}
		// The layer as counted first where it is among them (an Istio route always is; a
		// Linkerd route timed by another object's timeouts is not: those replace its own).
		if j := slices.Index(choices[i], base[i+1]); j > 0 {
			choices[i][0], choices[i][j] = choices[i][j], choices[i][0]
		}
		base[i+1] = choices[i][0]
		n *= len(choices[i])
		if n > maxHops {
			n = maxHops + 1
		}
	}
	if n == 1 {
		return []graph.Hop{base}
	}
	if n > maxHops {
		h := slices.Clone(base)
		for i, c := range choices {
			h[i+1] = envelope(c)
		}
		return []graph.Hop{h}
	}
	out := []graph.Hop{base}
	pick := make([]int, len(choices))
	for {
		// The next combination, in the order of an odometer whose first wheel is the last layer.
		i := len(pick) - 1
		for i >= 0 {
			pick[i]++
			if pick[i] < len(choices[i]) {
				break
			}
			pick[i] = 0
			i--
		}
		if i < 0 {
			return out
		}
		h := slices.Clone(base)
		for j, k := range pick {
			h[j+1] = choices[j][k]
		}
		out = append(out, h)
	}
}

// EntryHops are the hops of an entrypoint's client attempts whose layers are e's and whose
// first layer is the largest of alts (Set.EntryLayers): the same hop with that layer replaced by
// each of alts, as Hops does for an edge, since the rule or route a request takes is not known.
func (s *Set) EntryHops(e Edge, alts []Layer) []graph.Hop {
	h := make(graph.Hop, 0, len(e.Layers))
	for _, l := range e.Layers {
		h = append(h, s.TimeLayer(l))
	}
	out := []graph.Hop{h}
	if len(h) == 0 {
		return out
	}
	seen := []graph.TimeLayer{h[0]}
	for _, a := range alts {
		tl := s.TimeLayer(a)
		if slices.Contains(seen, tl) {
			continue
		}
		seen = append(seen, tl)
		alt := slices.Clone(h)
		alt[0] = tl
		out = append(out, alt)
	}
	return out
}

// timeAlternatives are the layers a call may take in l's place (l among them), whose tries are
// no more than l's but whose time may be longer: every http route for sidecars of l's
// VirtualService (Siblings), every rule of l's Gateway API route as Istio applies it (its retry,
// else Istio's default). None for other layers: one object and field decides them (Linkerd's
// annotations are the route's, for every rule), or they are entry layers (EntryHops); none
// either when l is not one of those routes as they read (among).
func (s *Set) timeAlternatives(l Layer) []Layer {
	kind, _, _ := strings.Cut(l.Object, " ")
	switch {
	case l.Kind != Istio && l.Kind != IstioWaypoint && l.Kind != GAMMA, l.NoRuleTimes:
		return nil
	case kind == "VirtualService" && strings.HasPrefix(l.FieldPath, "spec.http["):
		if l.Kind == GAMMA {
			return nil
		}
		return among(l, s.Siblings(GroupIstio, l))
	case (kind == "HTTPRoute" || kind == "GRPCRoute") && strings.HasPrefix(l.FieldPath, "spec.rules["):
		_, nsName, _ := strings.Cut(l.Object, " ")
		r := s.routes[GroupGateway+"/"+kind+"/"+nsName]
		if r == nil {
			return nil
		}
		at := ""
		if l.Kind == IstioWaypoint {
			if i := strings.LastIndex(l.Note, " at "); i >= 0 {
				at = l.Note[i:]
			}
		}
		out := make([]Layer, 0, len(r.Spec.Rules))
		for i := range r.Spec.Rules {
			a, ok := gammaRule(r, i)
			if ok {
				a.Note += at
			} else {
				a = withDefault(s.istioDefault(fmt.Sprintf("%s spec.rules[%d] sets no retry%s", r.id(), i, at)), a)
			}
			if l.Kind == IstioWaypoint {
				a.Kind = IstioWaypoint
			}
			a.Unset = l.Unset // the tries without a retry block: the same mesh weighs every rule
			out = append(out, a)
		}
		return among(l, out)
	}
	return nil
}

// TimeAlternatives are the layers a call may take in l's place, l among them (timeAlternatives:
// the other routes of its VirtualService or Gateway API route; none for a Linkerd layer, whose
// routes depend on the caller: CallHops), for the mesh gate to judge a timeout raised on a route
// other than the counted one.
func (s *Set) TimeAlternatives(l Layer) []Layer {
	if s == nil {
		return nil
	}
	return s.timeAlternatives(l)
}

// among is alts when l is one of them, else none: a layer read another way (an egress gateway's
// route, a route parented to a ServiceEntry) has other alternatives than its object's routes.
func among(l Layer, alts []Layer) []Layer {
	for _, a := range alts {
		if a == l {
			return alts
		}
	}
	return nil
}

// envelope is a layer at least as long as each of ls whatever it waits on: the most tries, the
// longest per-try and overall timeouts (none if one has none), backoff and delay.
func envelope(ls []graph.TimeLayer) graph.TimeLayer {
	e := ls[0]
	last := lastTry(e)
	capped := e.BackoffBase == 0 || e.BackoffMax != 0
	for _, l := range ls[1:] {
		e.Tries = max(e.Tries, l.Tries)
		e.PerTry = longest(e.PerTry, l.PerTry)
		e.Timeout = longest(e.Timeout, l.Timeout)
		last = max(last, lastTry(l))
		e.BackoffBase = max(e.BackoffBase, l.BackoffBase)
		e.BackoffMax = max(e.BackoffMax, l.BackoffMax)
		capped = capped && (l.BackoffBase == 0 || l.BackoffMax != 0)
		e.Delay = max(e.Delay, l.Delay)
	}
	if !capped {
		e.BackoffMax = 0 // one waits without a cap
	}
	e.LastTry = 0
	if e.PerTry != 0 && last != e.PerTry {
		e.LastTry = last
	}
	return e
}

// longest of two bounds, 0 being none (the longest).
func longest(a, b time.Duration) time.Duration {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

// lastTry is what bounds l's last try: Forever for nothing.
func lastTry(l graph.TimeLayer) time.Duration {
	switch {
	case l.LastTry != 0:
		return l.LastTry
	case l.PerTry == 0:
		return graph.Forever
	}
	return l.PerTry
}

// ingressNginxTime is the time of an ingress-nginx layer (ingressnginx_config.go nginxTime): of
// the controllers serving its Ingress, the longest per-try and overall bounds (none, if one has
// none), as the layer counts the most tries.
func (s *Set) ingressNginxTime(l Layer) LayerTime {
	var lt LayerTime
	if s == nil {
		return lt
	}
	kind, nsName, _ := strings.Cut(l.Object, " ")
	ing := s.ingresses[GroupNetworking+"/"+kind+"/"+nsName]
	if ing == nil {
		return lt
	}
	u := s.ingressController(ing)
	var sources []string
	for i, src := range s.nginxSources(u) {
		t, from := nginxTime(u, src)
		// 0 is no bound, and stays: the longest wins.
		if i == 0 || lt.PerTry > 0 && (t.PerTry == 0 || t.PerTry > lt.PerTry) {
			lt.PerTry = t.PerTry
		}
		if i == 0 || lt.Timeout > 0 && (t.Timeout == 0 || t.Timeout > lt.Timeout) {
			lt.Timeout = t.Timeout
		}
		if !slices.Contains(sources, from) {
			sources = append(sources, from)
		}
	}
	lt.Source = strings.Join(sources, ", ")
	return lt
}
