package mesh

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Istio's fault injection (VirtualService spec.http[].fault), as it bears on time. Istio puts
// a route's fault in the per-route config of Envoy's fault filter (pilot route.go
// TranslateFault), which sits before the router in every sidecar's, gateway's and waypoint's
// filter chain (listener_builder.go: Fault, Cors, ..., router last). The filter's decodeHeaders
// holds the request on a timer (StopIteration) and only then lets it on to the router, whose
// route timeout starts once it has the whole request (RouteAction.timeout: "from the point at
// which the entire downstream request has been processed") and whose retries are new upstream
// requests that do not pass the filter again. So a delay is held once per request the layer
// receives, before its tries and outside its timeout and per-try timeout (graph.TimeLayer.Delay).
//
// fault.abort answers at once without calling the destination (the router never runs): no try,
// no time. It can only lower the count and the time, and only for the requests it hits, so the
// worst case (an upper bound) takes nothing off for it.

// faultFields are the fields of a VirtualService's routes that say which requests a delay can
// hit: the gateways its matches bind it to, and the delay.
type faultFields struct {
	Match []struct {
		Gateways []string `json:"gateways"`
	} `json:"match"`
	Fault *struct {
		Delay *faultDelayFields `json:"delay"`
	} `json:"fault"`
}

// faultDelayFields is a route's fault.delay.
type faultDelayFields struct {
	FixedDelay       *string `json:"fixedDelay"`
	ExponentialDelay *string `json:"exponentialDelay"`
	Percentage       *struct {
		Value *float64 `json:"value"`
	} `json:"percentage"`
	Percent *int64 `json:"percent"`
}

// faultDelay is a route's delay: d, and what it says ("spec.http[0].fault.delay.fixedDelay 7s").
type faultDelay struct {
	d     time.Duration
	field string
	// pct is the share of requests held, as Envoy reads it (100 for a deprecated percent over
	// 100 or below 0, which Istio passes on and Envoy applies to every request).
	pct float64
}

// readFaultDelay reads route i's fault.delay as Istio translates it: no delay for a percentage of
// 0 (or none: Istio passes the deprecated percent, 0 when unset), for a delay with neither
// fixedDelay nor exponentialDelay, and for a request the route's match does not take (the worst
// case: it can). A value Istio's validation or CRD refuses is an error naming the field.
func readFaultDelay(id string, i int, f *faultFields) (faultDelay, error) {
	if f.Fault == nil || f.Fault.Delay == nil {
		return faultDelay{}, nil
	}
	return readDelay(id, i, f.Fault.Delay)
}

// readDelay is readFaultDelay of route i's delay dl.
func readDelay(id string, i int, dl *faultDelayFields) (faultDelay, error) {
	base := fmt.Sprintf("spec.http[%d].fault.delay", i)
	var pct float64
	switch {
	case dl.Percentage != nil:
		if dl.Percentage.Value != nil {
			pct = *dl.Percentage.Value
		}
		// pkg/config/validation validatePercentage.
		if pct < 0 || pct > 100 || (pct > 0 && pct < 0.0001) {
			return faultDelay{}, fmt.Errorf("%s %s.percentage.value: %s is refused by Istio: 0, or 0.0001 to 100", id, base, strconv.FormatFloat(pct, 'g', -1, 64))
		}
	case dl.Percent != nil:
		// Not validated by Istio: it becomes Envoy's numerator over 100 (as an unsigned
		// number), and a numerator over the denominator holds every request.
		pct = float64(*dl.Percent)
		if pct < 0 || pct > 100 {
			pct = 100
		}
	}
	switch {
	case dl.FixedDelay != nil && dl.ExponentialDelay != nil:
		return faultDelay{}, fmt.Errorf("%s %s: fixedDelay %q and exponentialDelay %q together, which Istio's CRD refuses (one of them)", id, base, *dl.FixedDelay, *dl.ExponentialDelay)
	case dl.ExponentialDelay != nil:
		return faultDelay{}, fmt.Errorf("%s %s.exponentialDelay: %q is refused by Istio (\"exponentialDelay not supported yet\"): use fixedDelay", id, base, *dl.ExponentialDelay)
	case dl.FixedDelay == nil:
		return faultDelay{}, nil // Istio sends Envoy no delay
	}
	field := base + ".fixedDelay"
	if d, err := time.ParseDuration(strings.TrimSpace(*dl.FixedDelay)); err == nil && d == 0 {
		return faultDelay{}, fmt.Errorf("%s %s: %q is refused by Istio (at least 1ms): leave the delay out for none", id, field, *dl.FixedDelay)
	}
	d, err := parseTime(id, field, dl.FixedDelay, goGrammar)
	if err != nil || pct == 0 {
		return faultDelay{}, err
	}
	fd := faultDelay{d: d, field: field + " " + *dl.FixedDelay, pct: pct}
	if pct < 100 {
		fd.field += " at " + strconv.FormatFloat(pct, 'g', -1, 64) + "%"
	}
	return fd, nil
}

// routeScope is the gateways route f of a VirtualService with spec.gateways gws applies on
// ("mesh": the sidecars), by name without namespace: its matches' gateways, else the object's,
// else the mesh. Two routes with a gateway in common can take the same request.
func routeScope(gws []string, f *faultFields) []string {
	if len(gws) == 0 {
		gws = []string{"mesh"}
	}
	var out []string
	add := func(gs []string) {
		for _, g := range gs {
			if i := strings.LastIndexByte(g, '/'); i >= 0 {
				g = g[i+1:]
			}
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	if len(f.Match) == 0 {
		add(gws)
	}
	for _, m := range f.Match {
		if len(m.Gateways) > 0 {
			add(m.Gateways)
		} else {
			add(gws)
		}
	}
	return out
}

// delayOf is the delay a layer of route i of an object holds in the worst case: the longest of
// the delays of the routes that can take the same requests (first match wins, and which route a
// request matches is not known here), with what names it; the first such route on a tie.
func delayOf(ot *objTimes, i int) (time.Duration, string) {
	var d time.Duration
	var field string
	best := -1
	for _, g := range ot.rules[i].scope {
		j, ok := ot.longest[g]
		if r := &ot.rules[j]; ok && (r.delay.d > d || r.delay.d == d && d > 0 && j < best) {
			d, field, best = r.delay.d, r.delay.field, j
		}
	}
	return d, field
}

// delayIndex is objTimes.longest for rules: once per object, where delayOf scanned every rule
// for each route's layer (50,000 routes of one VirtualService took 9 s).
func delayIndex(rules []ruleTime) map[string]int {
	var out map[string]int
	for j := range rules {
		r := &rules[j]
		if r.delay.d <= 0 {
			continue
		}
		for _, g := range r.scope {
			if k, ok := out[g]; !ok || r.delay.d > rules[k].delay.d {
				if out == nil {
					out = map[string]int{}
				}
				out[g] = j
			}
		}
	}
	return out
}

// WarnIstioFaultDelay: a route's fault delay, which the caller's sidecar holds before the route's
// timeouts start.
func WarnIstioFaultDelay(id, field string) string {
	return fmt.Sprintf("%s %s: Istio's fault injection holds each request it hits in the caller's proxy before the route's timeouts start: counted once per request in the worst time to answer", id, field)
}

// Envoy Gateway's fault injection (BackendTrafficPolicy spec.faultInjection, envoyproxy/gateway
// v1.9.1 api/v1alpha1/fault_injection.go): the policy's delay goes into the per-route config of
// Envoy's fault filter on every route the policy covers (internal/xds/translator/fault.go
// patchRoute), the filter sits before the router as in Istio's case, and so the delay is held
// once per request at the entry, before the route's tries and outside its timeouts. Abort, as
// Istio's, takes nothing off the worst case.

// btpFaultFields is a BackendTrafficPolicy's spec.faultInjection.
type btpFaultFields struct {
	Delay *struct {
		FixedDelay *string `json:"fixedDelay"`
		// Percentage is a float32 with the CRD's default 100 and no bounds: Envoy Gateway
		// passes uint32(p x 10000) over a million (fractionalpercent.FromFloat32).
		Percentage *float64 `json:"percentage"`
	} `json:"delay"`
	Abort *struct {
		HTTPStatus *int64   `json:"httpStatus"`
		GrpcStatus *int64   `json:"grpcStatus"`
		Percentage *float64 `json:"percentage"`
	} `json:"abort"`
}

// readBTPFault reads a BackendTrafficPolicy's spec.faultInjection f: its delay, none for a
// percentage of 0 or a zero delay. What the CRD refuses (its schema and CEL rules: a delay
// without fixedDelay or with a fixedDelay not a Gateway API duration, neither delay nor abort, an
// abort with both or neither of httpStatus and grpcStatus, or out of their bounds) is an error
// naming the field: such an object is never stored.
func readBTPFault(id string, f *btpFaultFields) (faultDelay, error) {
	const base = "spec.faultInjection"
	if f == nil {
		return faultDelay{}, nil
	}
	if f.Delay == nil && f.Abort == nil {
		return faultDelay{}, fmt.Errorf("%s %s: neither delay nor abort, which Envoy Gateway's CRD refuses (\"Delay and abort faults are set at least one.\")", id, base)
	}
	if a := f.Abort; a != nil {
		switch {
		case a.HTTPStatus != nil && a.GrpcStatus != nil:
			return faultDelay{}, fmt.Errorf("%s %s.abort: httpStatus %d and grpcStatus %d together, which Envoy Gateway's CRD refuses (one of them)", id, base, *a.HTTPStatus, *a.GrpcStatus)
		case a.HTTPStatus == nil && a.GrpcStatus == nil:
			return faultDelay{}, fmt.Errorf("%s %s.abort: neither httpStatus nor grpcStatus, which Envoy Gateway's CRD refuses (one of them)", id, base)
		case a.HTTPStatus != nil && (*a.HTTPStatus < 200 || *a.HTTPStatus > 600):
			return faultDelay{}, fmt.Errorf("%s %s.abort.httpStatus: %d is refused by Envoy Gateway's CRD: 200 to 600", id, base, *a.HTTPStatus)
		case a.GrpcStatus != nil && (*a.GrpcStatus < 0 || *a.GrpcStatus > 16):
			return faultDelay{}, fmt.Errorf("%s %s.abort.grpcStatus: %d is refused by Envoy Gateway's CRD: 0 to 16", id, base, *a.GrpcStatus)
		}
	}
	dl := f.Delay
	if dl == nil {
		return faultDelay{}, nil
	}
	field := base + ".delay.fixedDelay"
	if dl.FixedDelay == nil {
		return faultDelay{}, fmt.Errorf("%s %s: missing, which Envoy Gateway's CRD requires in a delay", id, field)
	}
	d, err := parseTime(id, field, dl.FixedDelay, gatewayGrammar)
	if err != nil {
		return faultDelay{}, err
	}
	pct := 100.0 // the CRD's default
	if dl.Percentage != nil {
		pct = *dl.Percentage
	}
	if d == 0 || pct == 0 {
		return faultDelay{}, nil
	}
	fd := faultDelay{d: d, field: field + " " + *dl.FixedDelay, pct: pct}
	switch {
	case pct < 0 || pct > 100:
		// Over 100 the numerator passes the denominator and Envoy holds every request; a
		// negative float32 to uint32 is left to the platform by Go: counted as every request.
		fd.pct = 100
	case pct < 100:
		fd.field += " at " + strconv.FormatFloat(pct, 'g', -1, 64) + "%"
	}
	return fd, nil
}

// policiesDelay is the longest delay of the BackendTrafficPolicies that cover route r (x's
// policies by target): those targeting r, else those targeting one of its parent Gateways, as
// policyLayer picks a retry. Envoy Gateway takes a route's policy over its Gateway's, merged
// only with mergeType; a route policy without a delay falls through to its Gateway's here, an
// upper bound. With what names it ("BackendTrafficPolicy shop/p spec.faultInjection...").
func policiesDelay(x *index, r *route) (time.Duration, string) {
	pick := func(key string) (time.Duration, string) {
		var d time.Duration
		var src string
		for _, p := range x.policies[key] {
			if p.delay.d > d {
				d, src = p.delay.d, p.id()+" "+p.delay.field
			}
		}
		return d, src
	}
	if d, src := pick(r.Kind + "/" + r.Metadata.Namespace + "/" + r.Metadata.Name); d > 0 {
		return d, src
	}
	var d time.Duration
	var src string
	for _, p := range r.Spec.ParentRefs {
		if !p.isGateway() {
			continue
		}
		if pd, ps := pick("Gateway/" + p.namespaceOr(r.Metadata.Namespace) + "/" + p.Name); pd > d {
			d, src = pd, ps
		}
	}
	return d, src
}

// gatewayLayerDelay is the fault delay of an entry layer l: for a route's (Kind Gateway), the
// policies covering the route (policiesDelay); for a BackendTrafficPolicy's (it sets the retry
// of routes without their own), the longest over the routes whose rules take it, since the layer
// does not say which route it came from (an upper bound where one policy serves several).
func (s *Set) gatewayLayerDelay(l Layer) (time.Duration, string) {
	if !s.anyPolicyDelay() {
		return 0, ""
	}
	x := s.index()
	switch l.Kind {
	case Gateway:
		kind, nsName, _ := strings.Cut(l.Object, " ")
		r := s.routes[GroupGateway+"/"+kind+"/"+nsName]
		if r == nil {
			return 0, ""
		}
		return policiesDelay(x, r)
	case EnvoyGateway:
		var d time.Duration
		var src string
		seen := map[*route]bool{}
		backends := slices.Collect(maps.Keys(x.gatewayRoutes))
		slices.SortFunc(backends, func(a, b ServiceRef) int { return strings.Compare(a.String(), b.String()) })
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
					if rd, rs := policiesDelay(x, r); rd > d {
						d, src = rd, rs
					}
					break
				}
			}
		}
		return d, src
	}
	return 0, ""
}

// anyPolicyDelay: a BackendTrafficPolicy of the Set has a fault delay (most have none, and then
// no layer looks further).
func (s *Set) anyPolicyDelay() bool {
	for _, p := range s.policies {
		if p.delay.d > 0 {
			return true
		}
	}
	return false
}

// WarnEnvoyGatewayFaultDelay: a BackendTrafficPolicy's fault delay (src names the object, the
// field and the value), which the gateway holds before the route's timeouts start.
func WarnEnvoyGatewayFaultDelay(src string) string {
	return src + ": Envoy Gateway's fault injection holds each request it hits in the gateway before the route's timeouts start: counted once per request in the worst time to answer"
}
