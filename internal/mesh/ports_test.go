package mesh

import (
	"strings"
	"testing"
)

// Each mesh reads a port's protocol its own way (ports.go), and a layer is judged by its own
// mesh's rule. Before, every layer was judged by Istio's port names: Kuma's 6 tries were counted
// on a port Kuma takes for TCP (no appProtocol), Linkerd's on a Postgres port it keeps opaque, and
// Dapr's and Consul's dropped on a Service whose port is named tcp-..., though neither goes by it.
func TestProtocolPerMesh(t *testing.T) {
	svc := func(ns, name, ann, ports string) string {
		return "\napiVersion: v1\nkind: Service\nmetadata: {name: " + name + ", namespace: " + ns + ", annotations: {" + ann + "}}\nspec:\n  selector: {app: " + name + "}\n  ports: " + ports
	}
	linkerdRetry := `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "2"`
	cases := []struct {
		name   string
		docs   []string
		caller Caller
		callee string
		port   int32
		want   string // the layers
	}{
		// Istio: istio/istio pkg/config/kube/conversion.go ConvertProtocol.
		{name: "Istio: an unnamed MySQL port is TCP (a well-known port is not sniffed)", docs: []string{nsIstio, svc("bookinfo", "mysql", "", "[{port: 3306}]")},
			caller: caller("bookinfo"), callee: "mysql",
			want: "Istio 1 (Istio does not retry tcp port 3306 of Service bookinfo/mysql (no protocol declared: Istio does not sniff well-known port 3306))"},
		{name: "Istio: an unnamed port elsewhere is sniffed (HTTP, the worst)", docs: []string{nsIstio, svc("bookinfo", "web", "", "[{port: 8080}]")},
			caller: caller("bookinfo"), callee: "web", want: "Istio 3 (" + istioNoVS + "web)"},
		{name: "Istio: appProtocol replaces the name (an unknown one is sniffed)", docs: []string{nsIstio, svc("bookinfo", "web", "", "[{name: tcp-web, port: 8080, appProtocol: custom}]")},
			caller: caller("bookinfo"), callee: "web", want: "Istio 3 (" + istioNoVS + "web)"},
		{name: "Istio: appProtocol kubernetes.io/wss is HTTPS", docs: []string{nsIstio, svc("bookinfo", "web", "", "[{name: http-web, port: 8443, appProtocol: kubernetes.io/wss}]")},
			caller: caller("bookinfo"), callee: "web", want: "Istio 1 (Istio does not retry https port 8443 (http-web) of Service bookinfo/web)"},
		{name: "Istio: UDP", docs: []string{nsIstio, svc("bookinfo", "dns", "", "[{name: http, port: 53, protocol: UDP}]")},
			caller: caller("bookinfo"), callee: "dns", want: "Istio 1 (Istio does not retry udp port 53 (http) of Service bookinfo/dns)"},
		// Linkerd: linkerd/linkerd2 policy-controller outbound index, AppProtocol.
		{name: "Linkerd: a Postgres port is opaque by default, whatever its name", docs: []string{nsLinkerd, svc("emojivoto", "db", linkerdRetry, "[{name: http, port: 5432}]")},
			caller: caller("emojivoto"), callee: "db",
			want: "Linkerd 1 (Linkerd does not retry opaque port 5432 (http) of Service emojivoto/db (in Linkerd's default opaque ports 25,587,3306,4444,5432,6379,9300,11211))"},
		{name: "Linkerd: the port name is not read (tcp-web is detected, HTTP)", docs: []string{nsLinkerd, svc("emojivoto", "web", linkerdRetry, "[{name: tcp-web, port: 8080}]")},
			caller: caller("emojivoto"), callee: "web", want: `Linkerd 3 (Service emojivoto/web metadata.annotations["retry.linkerd.io/limit"]: "2")`},
		{name: "Linkerd: the Service's opaque-ports replaces the default", docs: []string{nsLinkerd, svc("emojivoto", "web", linkerdRetry+`, config.linkerd.io/opaque-ports: "8000-8100"`, "[{port: 8080}]")},
			caller: caller("emojivoto"), callee: "web",
			want: `Linkerd 1 (Linkerd does not retry opaque port 8080 of Service emojivoto/web (in the Service's config.linkerd.io/opaque-ports "8000-8100"))`},
		{name: "Linkerd: the namespace's opaque-ports, which the injector copies onto the Service", docs: []string{`
apiVersion: v1
kind: Namespace
metadata: {name: emojivoto, annotations: {linkerd.io/inject: enabled, config.linkerd.io/opaque-ports: "8080"}}`, svc("emojivoto", "web", linkerdRetry, "[{port: 8080}]")},
			caller: caller("emojivoto"), callee: "web",
			want: `Linkerd 1 (Linkerd does not retry opaque port 8080 of Service emojivoto/web (in its namespace's config.linkerd.io/opaque-ports "8080"))`},
		{name: "Linkerd: an appProtocol it does not know is opaque", docs: []string{nsLinkerd, svc("emojivoto", "emoji-svc", linkerdRetry, "[{name: grpc, port: 8080, appProtocol: grpc}]")},
			caller: caller("emojivoto"), callee: "emoji-svc",
			want: `Linkerd 1 (Linkerd does not retry opaque port 8080 (grpc) of Service emojivoto/emoji-svc (appProtocol "grpc": Linkerd reads http and kubernetes.io/h2c, any other value as opaque))`},
		{name: "Linkerd: appProtocol http wins over the opaque default", docs: []string{nsLinkerd, svc("emojivoto", "db", linkerdRetry, "[{port: 5432, appProtocol: http}]")},
			caller: caller("emojivoto"), callee: "db", want: `Linkerd 3 (Service emojivoto/db metadata.annotations["retry.linkerd.io/limit"]: "2")`},
		// Kuma: kumahq/kuma ProtocolTagFor.
		{name: "Kuma: no appProtocol is TCP, whatever the port's name", docs: []string{nsKuma, kumaMeshDefault, svc("kuma-demo", "kv", "", "[{name: http, port: 5050}]")},
			caller: caller("kuma-demo"), callee: "kv",
			want: "Kuma 1 (Kuma does not retry tcp port 5050 (http) of Service kuma-demo/kv (no appProtocol Kuma reads and no 5050.service.kuma.io/protocol: Kuma's default))"},
		{name: "Kuma: the port's protocol annotation", docs: []string{nsKuma, kumaMeshDefault, svc("kuma-demo", "kv", `5050.service.kuma.io/protocol: http`, "[{name: tcp, port: 5050}]")},
			caller: caller("kuma-demo"), callee: "kv",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is)"},
		{name: "Kuma: appProtocol grpc", docs: []string{nsKuma, kumaMeshDefault, svc("kuma-demo", "kv", "", "[{port: 5050, appProtocol: grpc}]")},
			caller: caller("kuma-demo"), callee: "kv",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is)"},
		// Dapr: sidecar to sidecar over Dapr's own gRPC port, not the app's Service.
		{name: "Dapr: the callee's Service port is not Dapr's", docs: []string{svc("shop", "nodeapp", "", "[{name: tcp-app, port: 3000}]")},
			caller: caller("shop", "dapr.io/enabled", "true"), callee: "nodeapp",
			want: "Dapr 4 (Dapr built-in DaprBuiltInServiceRetries (3 retries), no Resiliency targets app nodeapp)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join(c.docs, "\n---\n"))
			e := s.EdgePort(c.caller, c.callee, c.port)
			var got []string
			for _, l := range e.Layers {
				got = append(got, string(l.Kind)+" "+l.String())
			}
			if strings.Join(got, "; ") != c.want || len(e.Warnings) != 0 {
				t.Fatalf("layers %q, warnings %q\nwant %q", strings.Join(got, "; "), e.Warnings, c.want)
			}
		})
	}
}

// A route attached to one port of a Service (parentRef port) binds calls to that port only; an
// upstream that names no port gets the worst (the route counted). Before, it bound every port.
func TestRouteParentRefPort(t *testing.T) {
	docs := nsLinkerd + "\n---\n" + `
apiVersion: v1
kind: Service
metadata: {name: emoji-svc, namespace: emojivoto}
spec: {selector: {app: emoji}, ports: [{name: grpc, port: 8080}, {name: prom, port: 8801}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: emoji, namespace: emojivoto, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "5"}}
spec:
  parentRefs: [{group: core, kind: Service, name: emoji-svc, port: 8080}]
  rules: [{backendRefs: [{name: emoji-svc, port: 8080}]}]`
	s := set(t, Options{}, docs)
	for _, c := range []struct {
		port  int32
		tries int64
	}{{8080, 6}, {8801, 1}, {0, 6}} {
		if got := s.EdgePort(caller("emojivoto"), "emoji-svc", c.port).Tries(); got != c.tries {
			t.Errorf("port %d: %d tries, want %d", c.port, got, c.tries)
		}
	}
}

// A VirtualService route whose matches each name a port takes calls to those ports only
// (HTTPMatchRequest.port); before, its retries counted on calls to any port of the host.
func TestVirtualServiceMatchPort(t *testing.T) {
	docs := nsIstio + "\n---\n" + vs("bookinfo", "echo", "  hosts: [echo]\n  http:\n  - match: [{port: 7070}]\n    retries: {attempts: 5}\n    route: [{destination: {host: echo}}]\n  - route: [{destination: {host: echo}}]\n    retries: {attempts: 1}\n")
	s := set(t, Options{}, docs)
	for _, c := range []struct {
		port  int32
		tries int64
	}{{7070, 6}, {80, 2}, {0, 6}} {
		if got := s.EdgePort(caller("bookinfo"), "echo", c.port).Tries(); got != c.tries {
			t.Errorf("port %d: %d tries, want %d", c.port, got, c.tries)
		}
	}
}
