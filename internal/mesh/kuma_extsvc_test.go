package mesh

import (
	"strings"
	"testing"
)

func mesDoc(name, protocol string) string {
	proto := ""
	if protocol != "" {
		proto = ", protocol: " + protocol
	}
	return "\napiVersion: kuma.io/v1alpha1\nkind: MeshExternalService\nmetadata: {name: " + name + ", namespace: kuma-system}\nspec:\n  match: {type: HostnameGenerator, port: 80" + proto + "}\n  endpoints: [{address: httpbin.org, port: 80}]"
}

// TestKumaMeshExternalService: a Kuma caller's call to <name>.extsvc.mesh.local gets the
// MeshRetries' conf for that MeshExternalService, the Mesh-wide items (the default
// mesh-retry-all-<mesh> among them) when none names it (kumahq/kuma 348b6528
// pkg/plugins/policies/core/rules/outbound/resourcerules.go ResourceRules.Compute). Before
// (advice19), no layer: 1 try where Kuma makes 6.
func TestKumaMeshExternalService(t *testing.T) {
	def := "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"
	cases := []struct {
		name   string
		docs   []string
		caller Caller
		callee string
		port   int32
		want   string
	}{
		{name: "default MeshRetry covers it", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http")}, caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local", want: def},
		{name: "trailing dot and case", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http")}, caller: caller("kuma-demo"), callee: "HTTPBIN.extsvc.mesh.local.", want: def},
		{name: "its port", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http")}, caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local", port: 80, want: def},
		{name: "another port: not its listener", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http")}, caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local", port: 8080},
		{name: "protocol unset is tcp: no request retried", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "")}, caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local"},
		{name: "http2: no request retried", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http2")}, caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local"},
		{name: "grpc takes the grpc conf", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "grpc"), meshRetryDoc("all", "", "{kind: Mesh}", "{http: {numRetries: 9}, grpc: {numRetries: 2}}")},
			caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local",
			want: "Kuma 3 (Kuma MeshRetry kuma-system/all numRetries 2) at MeshRetry kuma-system/all spec.to[0].default.grpc.numRetries"},
		{name: "not in the input: both confs, said", docs: []string{nsKuma, kumaMeshDefault}, caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is (MeshExternalService httpbin is not in the input: its protocol taken as http or grpc, an upper bound)) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "a MeshRetry naming it overrides the Mesh's", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http"),
			meshRetryDoc("ext", "", "{kind: MeshExternalService, name: httpbin}", "{http: {numRetries: 1}}")},
			caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local",
			want: "Kuma 2 (Kuma MeshRetry kuma-system/ext numRetries 1) at MeshRetry kuma-system/ext spec.to[0].default.http.numRetries"},
		{name: "a MeshRetry naming it raises it", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http"),
			meshRetryDoc("ext", "", "{kind: MeshExternalService, name: httpbin, namespace: kuma-system}", "{http: {numRetries: 8}}")},
			caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local",
			want: "Kuma 9 (Kuma MeshRetry kuma-system/ext numRetries 8) at MeshRetry kuma-system/ext spec.to[0].default.http.numRetries"},
		{name: "a MeshRetry naming another one", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http"),
			meshRetryDoc("ext", "", "{kind: MeshExternalService, name: other}", "{http: {numRetries: 8}}")},
			caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry mesh-retry-all-default is (Kuma creates it beside the others)) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "a MeshService item of the same name is not it", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http"),
			meshRetryDoc("ext", "", "{kind: MeshService, name: httpbin, namespace: kuma-system}", "{http: {numRetries: 8}}")},
			caller: caller("kuma-demo"), callee: "httpbin.extsvc.mesh.local",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry mesh-retry-all-default is (Kuma creates it beside the others)) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "caller not in Kuma", docs: []string{nsPlain, kumaMeshDefault, mesDoc("httpbin", "http")}, caller: caller("plain"), callee: "httpbin.extsvc.mesh.local"},
		{name: "another host form", docs: []string{nsKuma, kumaMeshDefault, mesDoc("httpbin", "http")}, caller: caller("kuma-demo"), callee: "a.httpbin.extsvc.mesh.local"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join(c.docs, "\n---\n"))
			e := s.EdgePort(c.caller, c.callee, c.port)
			var got []string
			for _, l := range e.Layers {
				got = append(got, string(l.Kind)+" "+l.String()+" at "+l.Object+" "+l.FieldPath)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q, want %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}

// TestKumaMeshExternalServiceBadProtocol: a protocol Kuma's CRD refuses is an error naming the
// object, the field and the value.
func TestKumaMeshExternalServiceBadProtocol(t *testing.T) {
	s := NewSet(Options{})
	_, err := s.AddManifest([]byte(mesDoc("httpbin", "HTTP")))
	want := `MeshExternalService kuma-system/httpbin: spec.match.protocol "HTTP": Kuma takes tcp, grpc, http or http2`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if s.Remove(GroupKuma, "MeshExternalService", "kuma-system", "httpbin") {
		t.Fatal("a MeshExternalService with a bad protocol was added")
	}
}

// TestKumaMeshExternalServiceRemove: removing the object takes its protocol away: a tcp
// MeshExternalService's host (no layer) is counted as the upper bound again.
func TestKumaMeshExternalServiceRemove(t *testing.T) {
	s := set(t, Options{}, strings.Join([]string{nsKuma, kumaMeshDefault, mesDoc("db", "tcp")}, "\n---\n"))
	if e := s.Edge(caller("kuma-demo"), "db.extsvc.mesh.local"); len(e.Layers) != 0 {
		t.Fatalf("tcp: layers %v, want none", e.Layers)
	}
	if !s.Remove(GroupKuma, "MeshExternalService", "kuma-system", "db") {
		t.Fatal("Remove: not found")
	}
	e := s.Edge(caller("kuma-demo"), "db.extsvc.mesh.local")
	if len(e.Layers) != 1 || e.Layers[0].Tries != 6 || !strings.HasSuffix(e.Layers[0].Note, "(MeshExternalService db is not in the input: its protocol taken as http or grpc, an upper bound)") {
		t.Fatalf("removed: layers %v, want one of 6 tries, the upper bound said", e.Layers)
	}
	if got := s.Counts()["MeshExternalService"]; got != 0 {
		t.Fatalf("Counts MeshExternalService %d, want 0", got)
	}
}
