package mesh

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestMetaKeysRead: each key of NamespaceKeys and ServiceKeys changes what the Set answers (a
// caller's meshes, an edge's layers and their times, an entrypoint's) for some value, in a
// cluster where it matters: none is listed that the Set does not read. Namespace a runs the
// caller, namespace b Service svc (ports 80 and 5432) that it calls, and an ingress route to.
func TestMetaKeysRead(t *testing.T) {
	type meta struct{ labels, anns map[string]string }
	type fixture struct{ a, b, svc meta }
	probe := func(f fixture) string {
		s := NewSet(Options{})
		add := func(kind, ns, name string, m meta) {
			md := map[string]any{"name": name, "labels": m.labels, "annotations": m.anns}
			if ns != "" {
				md["namespace"] = ns
			}
			obj := map[string]any{"apiVersion": "v1", "kind": kind, "metadata": md}
			if kind == "Service" {
				obj["spec"] = map[string]any{"ports": []any{map[string]any{"name": "web", "port": 80}, map[string]any{"name": "db", "port": 5432}}}
			}
			data, _ := json.Marshal(obj)
			if _, err := s.AddJSON(data); err != nil {
				t.Fatal(err)
			}
		}
		add("Namespace", "", "a", f.a)
		add("Namespace", "", "b", f.b)
		add("Service", "b", "svc", f.svc)
		// Kuma's default mesh (its default MeshRetry assumed), and an ingress route to svc.
		for _, doc := range []string{`{"apiVersion":"kuma.io/v1alpha1","kind":"Mesh","metadata":{"name":"default"}}`,
			`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"front","namespace":"b"},` +
				`"spec":{"parentRefs":[{"name":"gw"}],"rules":[{"backendRefs":[{"name":"svc","port":80}],"retry":{"attempts":2}}]}}`} {
			if _, err := s.AddJSON([]byte(doc)); err != nil {
				t.Fatal(err)
			}
		}
		c := Caller{Name: "Deployment a/app", Namespace: "a"}
		var out []string
		out = append(out, fmt.Sprint(s.InIstio(c), s.InLinkerd(c), s.InKuma(c), s.InAmbient(c)))
		for _, port := range []int32{80, 5432} {
			e := s.EdgePort(c, "svc.b", port)
			out = append(out, fmt.Sprintf("%+v", e))
			for _, l := range e.Layers {
				out = append(out, fmt.Sprintf("%+v", s.LayerTime(l)))
			}
		}
		out = append(out, fmt.Sprintf("%+v", s.Entry(ServiceRef{"b", "svc"})))
		return strings.Join(out, "\n")
	}
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	ambient := meta{labels: l(IstioDataplaneModeLabel, "ambient")}
	linkerdCaller := meta{anns: l(LinkerdInject, "enabled")}
	kumaCaller := meta{labels: l(KumaSidecarInjection, "enabled")}
	retried := meta{anns: l(LinkerdRetryLimit, "2", LinkerdTimeoutRequest, "10s")}
	// where: "a", "b" or "svc"; base: the cluster before the key is set; value: what it is set to.
	cases := map[MetaKey]struct {
		where, value string
		base         fixture
	}{
		{Mesh: Istio, Key: IstioInjectionLabel}:                                         {"a", "enabled", fixture{}},
		{Mesh: Istio, Key: IstioRevLabel}:                                               {"a", "canary", fixture{}},
		{Mesh: Istio, Key: IstioDataplaneModeLabel}:                                     {"a", "ambient", fixture{}},
		{Mesh: Istio, Key: IstioUseWaypointLabel}:                                       {"b", "waypoint", fixture{a: ambient}},
		{Mesh: Istio, Key: IstioUseWaypointNamespaceLabel}:                              {"b", "other", fixture{a: ambient, b: meta{labels: l(IstioUseWaypointLabel, "waypoint")}}},
		{Mesh: Istio, Key: IstioIngressUseWaypointLabel}:                                {"b", "true", fixture{b: meta{labels: l(IstioUseWaypointLabel, "waypoint")}}},
		{Mesh: Kuma, Key: KumaSidecarInjection}:                                         {"a", "enabled", fixture{}},
		{Mesh: Kuma, Key: KumaMeshLabel}:                                                {"a", "other", fixture{a: kumaCaller}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdInject}:                           {"a", "enabled", fixture{}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdOpaquePorts}:                      {"b", "80", fixture{a: linkerdCaller, svc: retried}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryHTTP}:                        {"svc", "5xx", fixture{a: linkerdCaller}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryGRPC}:                        {"svc", "unavailable", fixture{a: linkerdCaller}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryTimeout}:                     {"svc", "1s", fixture{a: linkerdCaller}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdTimeoutRequest}:                   {"svc", "1s", fixture{a: linkerdCaller, svc: retried}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdTimeoutResponse}:                  {"svc", "1s", fixture{a: linkerdCaller, svc: retried}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdTimeoutIdle}:                      {"svc", "never", fixture{a: linkerdCaller, svc: retried}}, // does not parse: the others dropped
		{Mesh: Kuma, Annotation: true, Key: KumaProtocolAnnotationSuffix, Suffix: true}: {"svc", "tcp", fixture{a: kumaCaller}},
	}
	// The Service's keys where a Namespace's are read the same way.
	svcCases := map[MetaKey]struct {
		where, value string
		base         fixture
	}{
		{Mesh: Istio, Key: IstioUseWaypointLabel}:                  {"svc", "waypoint", fixture{a: ambient}},
		{Mesh: Istio, Key: IstioUseWaypointNamespaceLabel}:         {"svc", "other", fixture{a: ambient, svc: meta{labels: l(IstioUseWaypointLabel, "waypoint")}}},
		{Mesh: Istio, Key: IstioIngressUseWaypointLabel}:           {"svc", "true", fixture{svc: meta{labels: l(IstioUseWaypointLabel, "waypoint")}}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdOpaquePorts}: {"svc", "80", fixture{a: linkerdCaller, svc: retried}},
		{Mesh: Linkerd, Annotation: true, Key: LinkerdRetryLimit}:  {"svc", "2", fixture{a: linkerdCaller}},
	}
	set := func(m meta, k MetaKey, v string) meta {
		out := meta{labels: map[string]string{}, anns: map[string]string{}}
		for kk, vv := range m.labels {
			out.labels[kk] = vv
		}
		for kk, vv := range m.anns {
			out.anns[kk] = vv
		}
		key := k.Key
		if k.Suffix {
			key = "80" + key
		}
		if k.Annotation {
			out.anns[key] = v
		} else {
			out.labels[key] = v
		}
		return out
	}
	check := func(kind string, keys []MetaKey, table map[MetaKey]struct {
		where, value string
		base         fixture
	}, fallback map[MetaKey]struct {
		where, value string
		base         fixture
	}) {
		for _, k := range keys {
			tc, ok := table[k]
			if !ok {
				tc, ok = fallback[k]
			}
			if !ok || (kind == "Namespace") == (tc.where == "svc") {
				t.Errorf("%s key %+v: no case shows the Set reads it", kind, k)
				continue
			}
			with := tc.base
			switch tc.where {
			case "a":
				with.a = set(with.a, k, tc.value)
			case "b":
				with.b = set(with.b, k, tc.value)
			default:
				with.svc = set(with.svc, k, tc.value)
			}
			if probe(with) == probe(tc.base) {
				t.Errorf("%s key %+v = %q on %s: the Set answers the same", kind, k, tc.value, tc.where)
			}
		}
	}
	check("Namespace", NamespaceKeys(), cases, nil)
	check("Service", ServiceKeys(), svcCases, cases)
}
