package telemetry

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// Input is what Discover merges: an observation (nil without --prometheus-url) and the
// manifests' workloads (as internal/analyze read them: kind, labels, annotations), their env
// and Services (nil without -f/-k).
type Input struct {
	Observation *Observation
	Workloads   []workload.Workload
	Pods        []PodEnv
	Services    []ServiceDef
	// InScope says whether a caller's namespace is asked for (-n, -A); nil: every namespace.
	InScope func(namespace string) bool
	// Gateways are more gateway workloads ("namespace/name" or "name"), as Options.Gateways.
	Gateways []string
}

// Proposal is one upstream a workload needs, and what shows it.
type Proposal struct {
	// Upstream is the entry as the annotation writes it: the Service's name from its own
	// namespace, name.namespace from another, with :PORT where the port picks the protocol
	// (mixedPorts); never attempts (discover does not invent them).
	Upstream string `json:"upstream"`
	// Sources are what showed the edge: a telemetry source, or "env NAME (container C[,
	// ConfigMap M key K])".
	Sources []string `json:"sources"`
	// RatePerSecond is the highest rate a telemetry source observed over the window.
	RatePerSecond float64 `json:"ratePerSecond,omitempty"`
	// ObservedTries are the tries per call the data shows (Istio), 0 when it does not: reported
	// beside, never written into the annotation.
	ObservedTries float64 `json:"observedTries,omitempty"`
	// NotObserved: only the manifests name the edge, and the telemetry given did not observe it
	// over the window (an env value that names a Service the workload may never call).
	NotObserved bool `json:"notObserved,omitempty"`
	// ServiceNotInInput: the env value names a Service the manifests do not hold.
	ServiceNotInInput bool `json:"serviceNotInInput,omitempty"`
}

// Difference is one upstream on which an existing annotation and what was discovered differ.
type Difference struct {
	Upstream string `json:"upstream"`
	// Declared is the annotation's entry ("payment=3"), "" when it does not declare it.
	Declared string `json:"declared"`
	// Observed is what showed the edge (the sources), "" when nothing did.
	Observed string `json:"observed"`
}

// WorkloadResult is one workload's upstreams.
type WorkloadResult struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	// KindInferred: neither the data nor the manifests say the kind (Istio's source_workload
	// names a controller; a service name of the service graph or of a proxy names no
	// workload): Deployment is assumed.
	KindInferred bool `json:"kindInferred,omitempty"`
	// Upstreams are the entries of the annotation: the existing one's, kept as written, else
	// the ones discovered, bare (one try each).
	Upstreams []string `json:"upstreams"`
	// Annotation is the retrycap.dev/upstreams value those entries make.
	Annotation string `json:"annotation"`
	// Existing: the workload already declares retrycap.dev/upstreams; it is kept, never
	// overwritten, and Differences say where it differs from what was discovered.
	Existing    bool         `json:"existing,omitempty"`
	Discovered  []Proposal   `json:"discovered"`
	Differences []Difference `json:"differences"`
}

// EntrypointResult is a Service a gateway or a caller outside the mesh calls.
type EntrypointResult struct {
	Namespace     string  `json:"namespace"`
	Service       string  `json:"service"`
	Via           string  `json:"via"`
	Source        string  `json:"source"`
	RatePerSecond float64 `json:"ratePerSecond,omitempty"`
}

// NonHTTPResult is an edge listed apart: no HTTP retry applies to it.
type NonHTTPResult struct {
	From          string  `json:"from"`
	To            string  `json:"to"`
	Source        string  `json:"source"`
	RatePerSecond float64 `json:"ratePerSecond,omitempty"`
	Why           string  `json:"why"`
}

// Result is what Discover found.
type Result struct {
	// Window is the telemetry's window ("5m0s"), "" without telemetry.
	Window string `json:"window,omitempty"`
	// Sources are the telemetry sources detected, and "env" when manifests were read.
	Sources     []string           `json:"sources"`
	Workloads   []WorkloadResult   `json:"workloads"`
	Entrypoints []EntrypointResult `json:"entrypoints,omitempty"`
	NonHTTP     []NonHTTPResult    `json:"nonHTTP,omitempty"`
	Warnings    []string           `json:"warnings,omitempty"`
}

// Found reports whether anything was discovered: an edge, an entrypoint or a non-HTTP edge.
func (r *Result) Found() bool {
	for _, w := range r.Workloads {
		if len(w.Discovered) > 0 {
			return true
		}
	}
	return len(r.Entrypoints) > 0 || len(r.NonHTTP) > 0
}

// gatewayLabels mark a workload as a mesh gateway: Istio's gateway charts' istio label, and
// the label Gateway API implementations (Istio's, Envoy Gateway's) put on the Deployment of a
// Gateway.
var gatewayLabels = []string{"gateway.networking.k8s.io/gateway-name", "gateway.envoyproxy.io/owning-gateway-name"}

// IstioInjectTemplates is the pod-template annotation that picks Istio's injection templates;
// "gateway" makes the pod an Istio gateway (istio/istio eed52ebb66ad
// manifests/charts/gateway/templates/deployment.yaml, whose istio label is the release name
// without "istio-": "ingress" for the istio-ingress release of Istio's Helm guide).
const IstioInjectTemplates = "inject.istio.io/templates"

func isGatewayWorkload(w *workload.Workload) bool {
	if v := w.Labels.Get("istio"); v == "ingressgateway" || v == "egressgateway" {
		return true
	}
	for _, t := range strings.Split(w.Annotations.Get(IstioInjectTemplates), ",") {
		if strings.TrimSpace(t) == "gateway" {
			return true
		}
	}
	labels := w.Labels
	for _, l := range gatewayLabels {
		if _, ok := labels.Lookup(l); ok {
			return true
		}
	}
	return false
}

type target struct {
	kind, ns, name string
	inferred       bool
	w              *workload.Workload
}

func (t target) key() string { return t.kind + "/" + t.ns + "/" + t.name }

type discoverer struct {
	in        Input
	byNSName  map[string][]*workload.Workload // ns/name -> workloads of any kind
	byKey     map[string]*workload.Workload
	byService map[string][]*workload.Workload // ns/service name -> workloads (ServiceName, and Services selecting them)
	services  map[string]*ServiceDef
	svcNS     map[string]bool // namespaces with a Service in the input
	gateways  map[string]bool
	results   map[string]*acc
	warn      []string
	unmapped  map[string]bool
	// noWorkloads are the callers of noWorkload, in the order first seen.
	noWorkloads     map[string]*noWorkloadEdges
	noWorkloadOrder []string
}

type acc struct {
	t     target
	props map[string]*Proposal // node -> proposal
	order []string
	// ports are the ports the env values call each node on, where the port picks the protocol
	// (mixedPorts); 0 for a value that gives none or a Service whose ports all read alike.
	ports map[string]map[int32]bool
}

// Discover merges the observed edges and the manifests' env edges into the upstreams each
// workload needs.
func Discover(in Input) *Result {
	d := &discoverer{in: in, byNSName: map[string][]*workload.Workload{}, byKey: map[string]*workload.Workload{}, byService: map[string][]*workload.Workload{},
		services: map[string]*ServiceDef{}, svcNS: map[string]bool{}, gateways: map[string]bool{}, results: map[string]*acc{}, unmapped: map[string]bool{},
		noWorkloads: map[string]*noWorkloadEdges{}}
	for _, g := range append(append([]string(nil), DefaultGateways...), in.Gateways...) {
		if !strings.Contains(g, "/") {
			g = "/" + g
		}
		d.gateways[g] = true
	}
	for i := range in.Services {
		s := &in.Services[i]
		d.services[s.Namespace+"/"+s.Name] = s
		d.svcNS[s.Namespace] = true
	}
	for i := range in.Workloads {
		w := &in.Workloads[i]
		d.byKey[w.Key()] = w
		d.byNSName[w.Namespace+"/"+w.Name] = append(d.byNSName[w.Namespace+"/"+w.Name], w)
		d.byService[w.Namespace+"/"+w.ServiceName()] = append(d.byService[w.Namespace+"/"+w.ServiceName()], w)
		if isGatewayWorkload(w) {
			d.gateways[w.Namespace+"/"+w.Name] = true
		}
	}
	for _, s := range in.Services {
		if len(s.Selector) == 0 {
			continue
		}
		for i := range in.Workloads {
			w := &in.Workloads[i]
			if selects(s, w) && !containsWorkload(d.byService[s.Namespace+"/"+s.Name], w) {
				d.byService[s.Namespace+"/"+s.Name] = append(d.byService[s.Namespace+"/"+s.Name], w)
			}
		}
	}
	res := &Result{Sources: []string{}, Workloads: []WorkloadResult{}}
	ob := in.Observation
	if ob != nil {
		res.Window = ob.Window.String()
		for _, s := range ob.Sources {
			res.Sources = append(res.Sources, string(s))
		}
		res.Warnings = append(res.Warnings, ob.Warnings...)
		for _, e := range ob.Edges {
			d.telemetryEdge(e, res)
		}
		for _, k := range d.noWorkloadOrder {
			nw := d.noWorkloads[k]
			d.warn = append(d.warn, fmt.Sprintf("%s: service %s maps to no workload, and is no %s to list it as a Deployment of: no patch (its upstreams: %s)",
				nw.src, nw.from, nameKinds[kindWorkload], strings.Join(nw.ups, ", ")))
		}
		for _, e := range ob.NonHTTP {
			if d.scope(e.From.Namespace) {
				res.NonHTTP = append(res.NonHTTP, NonHTTPResult{From: e.From.String(), To: e.To.String(), Source: string(e.Source), RatePerSecond: e.RatePerSecond, Why: e.Why})
			}
		}
		for _, e := range ob.Entrypoints {
			if d.scope(e.Namespace) {
				res.Entrypoints = append(res.Entrypoints, EntrypointResult{Namespace: e.Namespace, Service: e.Name, Via: e.Via, Source: string(e.Source), RatePerSecond: e.RatePerSecond})
			}
		}
	}
	if in.Pods != nil || in.Workloads != nil {
		res.Sources = append(res.Sources, string(SourceEnv))
	}
	d.envEdges(res)
	d.finish(res)
	res.Warnings = append(res.Warnings, d.warn...)
	return res
}

func containsWorkload(ws []*workload.Workload, w *workload.Workload) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

func selects(s ServiceDef, w *workload.Workload) bool {
	if s.Namespace != w.Namespace || len(s.Selector) == 0 {
		return false
	}
	for k, v := range s.Selector {
		if lv, ok := w.Labels.Lookup(k); !ok || lv != v {
			return false
		}
	}
	return true
}

func (d *discoverer) scope(ns string) bool { return d.in.InScope == nil || d.in.InScope(ns) }

func (d *discoverer) isGateway(ns, name string) bool {
	return d.gateways[ns+"/"+name] || d.gateways["/"+name]
}

// targets maps a caller to the workloads that make its calls.
func (d *discoverer) targets(c Caller, src Source) []target {
	manifests := len(d.in.Workloads) > 0
	unmapped := func(what string) {
		k := string(src) + " " + c.String()
		if manifests && !d.unmapped[k] {
			d.unmapped[k] = true
			d.warn = append(d.warn, fmt.Sprintf("%s: %s %s maps to no workload of the manifests: listed as a Deployment of that name (kind inferred)", src, what, c))
		}
	}
	switch {
	case c.Kind != "":
		if w := d.byKey[c.Kind+"/"+c.Namespace+"/"+c.Name]; w != nil {
			return []target{{kind: w.Kind, ns: w.Namespace, name: w.Name, w: w}}
		}
		if manifests {
			unmapped(strings.ToLower(c.Kind))
		}
		return []target{{kind: c.Kind, ns: c.Namespace, name: c.Name}}
	case !c.Service:
		ws := d.byNSName[c.Namespace+"/"+c.Name]
		if len(ws) > 0 {
			w := ws[0]
			for _, x := range ws {
				if x.Kind == workload.KindDeployment {
					w = x
				}
			}
			return []target{{kind: w.Kind, ns: w.Namespace, name: w.Name, w: w}}
		}
		unmapped("workload")
		return []target{{kind: workload.KindDeployment, ns: c.Namespace, name: c.Name, inferred: true}}
	}
	ws := d.byService[c.Namespace+"/"+c.Name]
	if len(ws) == 0 {
		if !kindWorkload.ok(c.Name) {
			return nil // a service name no workload can have ("web_app"): noWorkload says so
		}
		unmapped("service")
		return []target{{kind: workload.KindDeployment, ns: c.Namespace, name: c.Name, inferred: true}}
	}
	out := make([]target, 0, len(ws))
	for _, w := range ws {
		out = append(out, target{kind: w.Kind, ns: w.Namespace, name: w.Name, w: w})
	}
	return out
}

// upstreamName writes a callee as an annotation entry of a caller in namespace ns.
func upstreamName(to Callee, ns string) string {
	if to.Namespace == "" || to.Namespace == ns {
		return to.Name
	}
	return to.Name + "." + to.Namespace
}

func (d *discoverer) acc(t target) *acc {
	a := d.results[t.key()]
	if a == nil {
		a = &acc{t: t, props: map[string]*Proposal{}}
		d.results[t.key()] = a
	}
	return a
}

func (a *acc) proposal(up string) *Proposal {
	node := annotations.UpstreamNode(up, a.t.ns)
	p := a.props[node]
	if p == nil {
		p = &Proposal{Upstream: up}
		a.props[node] = p
		a.order = append(a.order, node)
	}
	return p
}

func addSource(p *Proposal, s string) {
	for _, x := range p.Sources {
		if x == s {
			return
		}
	}
	p.Sources = append(p.Sources, s)
}

func (d *discoverer) telemetryEdge(e Edge, res *Result) {
	if !d.scope(e.From.Namespace) {
		return
	}
	ts := d.targets(e.From, e.Source)
	if ts == nil {
		d.noWorkload(e)
		return
	}
	for _, t := range ts {
		if d.isGateway(t.ns, t.name) {
			res.Entrypoints = append(res.Entrypoints, EntrypointResult{Namespace: e.To.Namespace, Service: e.To.Name, Via: t.ns + "/" + t.name, Source: string(e.Source), RatePerSecond: e.RatePerSecond})
			continue
		}
		a := d.acc(t)
		p := a.proposal(upstreamName(e.To, t.ns))
		addSource(p, string(e.Source))
		p.RatePerSecond = max(p.RatePerSecond, e.RatePerSecond)
		if e.Tries > 0 {
			p.ObservedTries = e.Tries
		}
	}
}

// noWorkload keeps an edge whose caller is a service name that maps to no workload and is no
// workload's name either (a label value such as "web_app"): listed as a Deployment of that name,
// its patch would name an object kubectl refuses. Its upstreams are said in a warning instead.
func (d *discoverer) noWorkload(e Edge) {
	k := string(e.Source) + " " + e.From.String()
	nw := d.noWorkloads[k]
	if nw == nil {
		nw = &noWorkloadEdges{src: e.Source, from: e.From}
		d.noWorkloads[k] = nw
		d.noWorkloadOrder = append(d.noWorkloadOrder, k)
	}
	if up := upstreamName(e.To, e.From.Namespace); !slices.Contains(nw.ups, up) {
		nw.ups = append(nw.ups, up)
	}
}

// noWorkloadEdges are one such caller's upstreams, of one source.
type noWorkloadEdges struct {
	src  Source
	from Caller
	ups  []string
}

// proxyEnv are the variables that configure an HTTP client's proxy: NO_PROXY lists hosts the
// client does not send through it (retrycap's injector sets it to kubernetes.default.svc and
// the like), the others name the proxy; none is a call the app makes.
var proxyEnv = map[string]bool{"NO_PROXY": true, "HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true}

// mixedPorts reports whether svc has port among its ports and ports Istio's protocol selection
// reads both ways (HTTP or gRPC, retried; TCP, TLS, UDP, a database's, not): then the port the
// call names decides whether the mesh retries it, and the upstream is written NAME:PORT.
func mixedPorts(svc *ServiceDef, port int32) bool {
	has, retried, not := false, false, false
	for _, p := range svc.Ports {
		has = has || p.Port == port
		if mesh.IstioRetriesPort(p.Name, p.AppProtocol, p.Protocol, p.Port) {
			retried = true
		} else {
			not = true
		}
	}
	return has && retried && not
}

// telemetryExportVar reports whether an env variable configures a telemetry exporter: the
// OpenTelemetry SDKs' OTEL_EXPORTER_* (OTLP, Zipkin, Jaeger endpoints: the SDK environment
// variable specification), the Jaeger clients' JAEGER_ENDPOINT and JAEGER_AGENT_HOST, and names
// with the words OTLP, ZIPKIN or OTEL COLLECTOR (Sock Shop's ZIPKIN, flagd's
// FLAGD_OTEL_COLLECTOR_URI in the OpenTelemetry demo). A batch span processor or a metric reader
// exports on its own schedule, not once per inbound request, so the collector is no callee on a
// chain: before, the OpenTelemetry demo's every app was proposed otel-collector, and analyze
// counted 12 requests at the collector per entry request at checkout.
// telemetryPorts are the receivers' default ports of telemetry protocols: OTLP over gRPC 4317 and
// HTTP 4318 (the OTLP specification's defaults), Zipkin 9411, Jaeger's collector 14250 (gRPC) and
// 14268 (HTTP) and agent 6831, 6832 (jaegertracing.io "APIs"). A call there is an export.
var telemetryPorts = map[int32]bool{4317: true, 4318: true, 9411: true, 14250: true, 14268: true, 6831: true, 6832: true}

func telemetryExportVar(name string) bool {
	up := strings.ToUpper(name)
	if strings.HasPrefix(up, "OTEL_EXPORTER_") || up == "JAEGER_ENDPOINT" || up == "JAEGER_AGENT_HOST" {
		return true
	}
	words := strings.Split(up, "_")
	for i, w := range words {
		if w == "OTLP" || w == "ZIPKIN" || w == "OTEL" && i+1 < len(words) && words[i+1] == "COLLECTOR" {
			return true
		}
	}
	return false
}

// hostSuffixes end the names of variables that hold a host whose port is in a sibling
// variable: MYSQL_DB_HOST beside MYSQL_DB_PORT (Train-Ticket), REDIS_ADDR beside REDIS_PORT.
var hostSuffixes = []string{"_HOST", "_HOSTNAME", "_ADDR", "_ADDRESS", "_SERVER"}

// siblingPort is the port a host variable's sibling gives (ev NAME_HOST, the same container's
// NAME_PORT holding a port number) and the sibling's name, 0 when there is none: the port says
// whether the call is HTTP (a database's or broker's well-known port is not; before,
// MYSQL_DB_HOST was proposed as an HTTP upstream beside MYSQL_DB_PORT=3306). Without NAME_PORT,
// the NAME_PORT_<SUFFIX> siblings (OTEL_COLLECTOR_PORT_GRPC) give the port when they hold one
// port number between them; two different ports (NAME_PORT_GRPC=4317, NAME_PORT_HTTP=4318)
// leave the call's port unknown, as a looser match would guess it (small20). A port variable
// named otherwise (JAEGER_UI_PORT beside JAEGER_HOST) is not this host's.
func siblingPort(env []EnvVar, ev EnvVar) (int32, string) {
	if ev.Arg {
		return 0, ""
	}
	up := strings.ToUpper(ev.Name)
	for _, suf := range hostSuffixes {
		prefix, ok := strings.CutSuffix(up, suf)
		if !ok || prefix == "" {
			continue
		}
		var port int32
		var name string
		ambiguous := false
		for _, o := range env {
			if o.Arg || o.Container != ev.Container {
				continue
			}
			on := strings.ToUpper(o.Name)
			n, err := strconv.ParseUint(strings.TrimSpace(o.Value), 10, 16)
			if err != nil || n == 0 {
				continue
			}
			if on == prefix+"_PORT" {
				return int32(n), o.Name
			}
			if rest, ok := strings.CutPrefix(on, prefix+"_PORT_"); ok && rest != "" {
				switch {
				case port == 0:
					port, name = int32(n), o.Name
				case port != int32(n):
					ambiguous = true
				}
			}
		}
		if port > 0 && !ambiguous {
			return port, name
		}
	}
	return 0, ""
}

func (d *discoverer) envEdges(res *Result) {
	drops, splitDrops, words, hosts, exports := 0, 0, 0, 0, 0
	example, splitExample, wordExample, hostExample, exportExample := "", "", "", "", ""
	for _, pe := range d.in.Pods {
		if !d.scope(pe.Namespace) {
			continue
		}
		gateway := d.isGateway(pe.Namespace, pe.Name)
		t := target{kind: pe.Kind, ns: pe.Namespace, name: pe.Name}
		if w := d.byKey[pe.Key()]; w != nil {
			t.w = w
		}
		for _, ev := range pe.Env {
			if proxyEnv[strings.ToUpper(ev.Name)] {
				continue
			}
			if !ev.Arg && telemetryExportVar(ev.Name) {
				if len(ParseServiceRefs(ev.Value)) > 0 {
					exports++
					if exportExample == "" {
						exportExample = envExample(pe, ev, ev.Value)
					}
				}
				continue
			}
			sibling, siblingName := siblingPort(pe.Env, ev)
			value := ev.Value
			split := false
			if sibling > 0 && value != "" && !strings.ContainsAny(value, ":/,; \t\r\n") {
				split = true
				// A host variable's bare name beside its port (the OpenTelemetry demo's
				// FLAGD_HOST=flagd with FLAGD_PORT=8013, its proxy's FRONTEND_HOST=frontend with
				// FRONTEND_PORT=8080) is host:port split in two: read as such. Before, the bare
				// name was a word and the call was lost.
				value += ":" + strconv.Itoa(int(sibling))
			}
			exported := false
			for _, r := range ParseServiceRefs(value) {
				if r.Port == 0 && r.Scheme == "" {
					r.Port = sibling
				}
				if telemetryPorts[r.Port] {
					// An OTLP, Jaeger or Zipkin receiver's port: an exporter's endpoint whatever
					// the variable's name (Online Boutique's COLLECTOR_SERVICE_ADDR
					// "opentelemetrycollector:4317").
					if !exported {
						exported = true
						exports++
						if exportExample == "" {
							exportExample = envExample(pe, ev, r.Name)
						}
					}
					continue
				}
				ns := r.Namespace
				if ns == "" {
					ns = pe.Namespace
				}
				svc := d.services[ns+"/"+r.Name]
				if svc != nil && selectsPod(*svc, pe) {
					continue // the workload's own Service (its listen address)
				}
				inInput := svc != nil
				if ev.Arg && r.Port == 0 && r.Scheme == "" && !r.Qualified {
					// An argument of one word ("prod", "server", "worker") is a subcommand or
					// a mode far more often than an address: only host:port, a URL or a
					// name.ns.svc is read from command and args.
					continue
				}
				// A bare name.ns (no port, no scheme, no .svc) of a Service not in the input is a
				// word with a dot ("app.yaml", "v1.2", "com.example"), not an address.
				bare := r.Namespace != "" && r.Port == 0 && r.Scheme == "" && !r.Qualified
				if !inInput && bare {
					words++
					if wordExample == "" {
						wordExample = envExample(pe, ev, r.Name+"."+r.Namespace)
					}
					continue
				}
				if !inInput && !r.Qualified && r.Namespace != "" && publicTLD[r.Namespace] && !d.svcNS[r.Namespace] {
					// name.com, name.io: a host on the Internet ("grpcs://foo.com", Kuma's
					// KUMA_MULTIZONE_ZONE_GLOBAL_ADDRESS), not Service foo of a namespace com that
					// the input does not hold. Before, foo.com was proposed as an upstream.
					hosts++
					if hostExample == "" {
						hostExample = envExample(pe, ev, r.Name+"."+r.Namespace)
					}
					continue
				}
				if !inInput && !r.Qualified && d.svcNS[ns] {
					// The namespace's Services are in the input and none has this name: the
					// value is something else (a host of another kind, a placeholder).
					if split {
						// Said as what it is: a host variable beside its port, not a
						// host:port or URL (small20).
						splitDrops++
						if splitExample == "" {
							splitExample = envExample(pe, ev, r.Name) + fmt.Sprintf(" beside %s=%d", siblingName, sibling)
						}
						continue
					}
					drops++
					if example == "" {
						example = envExample(pe, ev, r.Name)
					}
					continue
				}
				src := ev.Source()
				to := Callee{ns, r.Name}
				if why := NonHTTPReason(r, svc); why != "" {
					res.NonHTTP = append(res.NonHTTP, NonHTTPResult{From: pe.Namespace + "/" + pe.Name, To: to.String(), Source: src, Why: why})
					continue
				}
				if gateway {
					res.Entrypoints = append(res.Entrypoints, EntrypointResult{Namespace: to.Namespace, Service: to.Name, Via: pe.Namespace + "/" + pe.Name, Source: src})
					continue
				}
				a := d.acc(t)
				up := upstreamName(to, pe.Namespace)
				p := a.proposal(up)
				addSource(p, src)
				if !inInput {
					p.ServiceNotInInput = true
				}
				port := int32(0)
				if svc != nil && r.Port != 0 && mixedPorts(svc, r.Port) {
					port = r.Port
				}
				node := annotations.UpstreamNode(up, t.ns)
				if a.ports == nil {
					a.ports = map[string]map[int32]bool{}
				}
				if a.ports[node] == nil {
					a.ports[node] = map[int32]bool{}
				}
				a.ports[node][port] = true
			}
		}
	}
	if drops > 0 {
		d.warn = append(d.warn, fmt.Sprintf("env: %d value(s) of the form host:port or URL name no Service of the input in a namespace whose Services it holds: not edges (e.g. %s)", drops, example))
	}
	if splitDrops > 0 {
		d.warn = append(d.warn, fmt.Sprintf("env: %d host variable(s) beside a port variable (NAME_HOST=name with NAME_PORT=port, read as name:port) name no Service of the input in a namespace whose Services it holds: not edges (e.g. %s)", splitDrops, splitExample))
	}
	if hosts > 0 {
		d.warn = append(d.warn, fmt.Sprintf("env: %d value(s) name a host under a top-level domain of the Internet (name.com, name.io) and the input holds no Service of such a namespace: hosts outside the cluster, not edges (e.g. %s)", hosts, hostExample))
	}
	if exports > 0 {
		d.warn = append(d.warn, fmt.Sprintf("env: %d value(s) of telemetry exporters' variables (OTEL_EXPORTER_*, *OTLP*, *ZIPKIN*, *OTEL_COLLECTOR*, JAEGER_ENDPOINT, JAEGER_AGENT_HOST) or on a telemetry receiver's port (OTLP 4317, 4318, Zipkin 9411, Jaeger 14250, 14268, 6831, 6832) name where the SDK sends spans, metrics and logs, in batches off the requests' path: not edges (e.g. %s)", exports, exportExample))
	}
	if words > 0 {
		d.warn = append(d.warn, fmt.Sprintf("env: %d value(s) of the form name.namespace without a port or scheme name no Service of the input: read as words (a file name, a version), not edges; write host:port, or give the Service (e.g. %s)", words, wordExample))
	}
}

// publicTLD are the top-level domains of the Internet most often seen in an env value's host,
// none of them a likely namespace name: host.com is a host outside the cluster unless the input
// holds Services of a namespace of that name. (A fuller list, such as the public suffix list,
// holds names that are common namespaces: shop, dev, app.)
var publicTLD = map[string]bool{"com": true, "net": true, "org": true, "edu": true, "gov": true, "mil": true, "int": true, "info": true, "biz": true, "io": true, "co": true, "ai": true}

// envExample names a value in a warning: whole when it is short and on one line, else by the
// word read in it (istio-cni's AMBIENT_ENABLEMENT_SELECTOR is a multi-line YAML selector whose
// "istio.io" filled the line before).
func envExample(pe PodEnv, ev EnvVar, word string) string {
	if len(ev.Value) <= maxExample && !strings.ContainsAny(ev.Value, "\n\r") {
		return fmt.Sprintf("%s %s/%s %s=%q", pe.Kind, pe.Namespace, pe.Name, ev.label(), ev.Value)
	}
	return fmt.Sprintf("%s %s/%s %s, a %d-byte value: %q in it", pe.Kind, pe.Namespace, pe.Name, ev.label(), len(ev.Value), word)
}

// maxExample is the longest value a warning quotes whole.
const maxExample = 100

func selectsPod(s ServiceDef, pe PodEnv) bool {
	if s.Namespace != pe.Namespace || len(s.Selector) == 0 {
		return false
	}
	for k, v := range s.Selector {
		if pe.Labels[k] != v {
			return false
		}
	}
	return true
}

// finish turns the accumulated proposals into results, against the existing annotations.
func (d *discoverer) finish(res *Result) {
	// Workloads that declare upstreams are listed even when nothing was discovered for them:
	// their declarations are then all differences.
	for i := range d.in.Workloads {
		w := &d.in.Workloads[i]
		if w.Annotations.Get(annotations.Upstreams) != "" && d.scope(w.Namespace) && !d.isGateway(w.Namespace, w.Name) {
			d.acc(target{kind: w.Kind, ns: w.Namespace, name: w.Name, w: w})
		}
	}
	telemetry := d.in.Observation != nil
	keys := make([]string, 0, len(d.results))
	for k := range d.results {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := d.results[k]
		wr := WorkloadResult{Namespace: a.t.ns, Kind: a.t.kind, Name: a.t.name, KindInferred: a.t.inferred, Upstreams: []string{}, Discovered: []Proposal{}, Differences: []Difference{}}
		sort.Strings(a.order)
		for _, node := range a.order {
			p := a.props[node]
			sort.Strings(p.Sources)
			env, tel := false, false
			for _, s := range p.Sources {
				if IsManifestSource(s) {
					env = true
				} else {
					tel = true
				}
			}
			p.NotObserved = telemetry && env && !tel
			if ps := a.ports[node]; len(ps) == 1 && !tel {
				for port := range ps {
					if port != 0 {
						// The Service has ports Istio retries on and ports it does not: the
						// port the app calls says which (analyze reads NAME:PORT so).
						p.Upstream += ":" + strconv.Itoa(int(port))
					}
				}
			}
			wr.Discovered = append(wr.Discovered, *p)
		}
		declared := ""
		if a.t.w != nil {
			declared = a.t.w.Annotations.Get(annotations.Upstreams)
		}
		if declared == "" {
			for _, p := range wr.Discovered {
				wr.Upstreams = append(wr.Upstreams, p.Upstream)
			}
			wr.Annotation = strings.Join(wr.Upstreams, ", ")
			res.Workloads = append(res.Workloads, wr)
			continue
		}
		wr.Existing, wr.Annotation = true, declared
		ups, err := annotations.ParseUpstreams(declared)
		if err != nil {
			d.warn = append(d.warn, fmt.Sprintf("%s %s/%s: annotation %s %q: %v: kept, not compared", a.t.kind, a.t.ns, a.t.name, annotations.Upstreams, declared, err))
			wr.Upstreams = append(wr.Upstreams, declared)
			res.Workloads = append(res.Workloads, wr)
			continue
		}
		seen := map[string]bool{}
		for _, u := range ups {
			entry := annotations.FormatUpstreams([]annotations.Upstream{u})
			wr.Upstreams = append(wr.Upstreams, entry)
			node := annotations.UpstreamNode(u.Name, a.t.ns)
			seen[node] = true
			if _, ok := a.props[node]; !ok {
				wr.Differences = append(wr.Differences, Difference{Upstream: u.Name, Declared: entry})
			}
		}
		for _, node := range a.order {
			if !seen[node] {
				p := a.props[node]
				wr.Differences = append(wr.Differences, Difference{Upstream: p.Upstream, Observed: describe(*p)})
			}
		}
		res.Workloads = append(res.Workloads, wr)
	}
	sort.SliceStable(res.Entrypoints, func(i, j int) bool {
		a, b := res.Entrypoints[i], res.Entrypoints[j]
		return a.Namespace+"/"+a.Service+"|"+a.Via+"|"+a.Source < b.Namespace+"/"+b.Service+"|"+b.Via+"|"+b.Source
	})
	sort.SliceStable(res.NonHTTP, func(i, j int) bool {
		a, b := res.NonHTTP[i], res.NonHTTP[j]
		return a.From+"|"+a.To+"|"+a.Source < b.From+"|"+b.To+"|"+b.Source
	})
}

// describe is a proposal's sources and rate in one string: "istio 2.5/s", "env PAYMENT_ADDR
// (container app)".
func describe(p Proposal) string {
	parts := make([]string, 0, len(p.Sources))
	for _, s := range p.Sources {
		if !IsManifestSource(s) && p.RatePerSecond > 0 {
			s += " " + FormatRate(p.RatePerSecond) + "/s"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// FormatRate writes a rate with three significant digits at most, no exponent.
func FormatRate(r float64) string {
	switch {
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64)
	case r >= 10:
		return strconv.FormatFloat(r, 'f', 1, 64)
	case r >= 1:
		return strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strconv.FormatFloat(r, 'f', 3, 64)
}
