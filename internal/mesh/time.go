package mesh

import (
	"fmt"
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
	d, field := delayOf(ot.rules, i)
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

// layerTime is LayerTime from the layer's own object and rule.
func (s *Set) layerTime(l Layer) LayerTime {
	var lt LayerTime
	switch l.Kind {
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
