package mesh

import (
	"strings"
	"testing"
)

// A sidecar's call to an external host that a ServiceEntry registers takes Istio's default route,
// with its default retries, on the entry's HTTP ports only (serviceentry.go). Before, the entry was
// ignored and every such call was 1 try: "www.googleapis.com:80" under bookinfo's egress rule
// without its VirtualService was within a cap of 2 (testdata/public/istio-egress-serviceentry-only).
func TestServiceEntryLayer(t *testing.T) {
	se := func(ns, hosts, ports, more string) string {
		return "\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ext, namespace: " + ns + "}\nspec:\n  hosts: " + hosts + "\n  ports: " + ports + "\n  resolution: DNS" + more
	}
	googleapis := se("bookinfo", "[www.googleapis.com]", "[{number: 80, name: http, protocol: HTTP}, {number: 443, name: https, protocol: HTTPS}]", "")
	const httpNote = "Istio 3 (Istio default, ServiceEntry bookinfo/ext registers www.googleapis.com (port 80 HTTP), no VirtualService binds it)"
	cases := []struct {
		name   string
		docs   []string
		caller Caller
		callee string
		port   int32
		want   string // the layers
		warn   string
	}{
		{name: "an HTTP port: Istio's default route retries", docs: []string{nsIstio, googleapis},
			caller: caller("bookinfo"), callee: "www.googleapis.com", port: 80, want: httpNote},
		{name: "an HTTPS port: the app's TLS passes through, no retry", docs: []string{nsIstio, googleapis},
			caller: caller("bookinfo"), callee: "www.googleapis.com", port: 443,
			want: "Istio 1 (Istio does not retry https port 443 HTTPS of host www.googleapis.com (ServiceEntry bookinfo/ext))"},
		{name: "no port named: the worst, said", docs: []string{nsIstio, googleapis},
			caller: caller("bookinfo"), callee: "www.googleapis.com",
			want: "Istio 3 (Istio default, ServiceEntry bookinfo/ext registers www.googleapis.com (port 80 HTTP, 443 HTTPS), no VirtualService binds it)",
			warn: "ServiceEntry bookinfo/ext registers www.googleapis.com with HTTP and other ports and Deployment bookinfo/productpage names no port in its upstream www.googleapis.com: counting the mesh's retries (the worst); write the upstream as www.googleapis.com:PORT"},
		{name: "a port the entry does not have: the catch-all passthrough, no layer", docs: []string{nsIstio, googleapis},
			caller: caller("bookinfo"), callee: "www.googleapis.com", port: 8080},
		{name: "a wildcard host", docs: []string{nsIstio, se("bookinfo", `["*.googleapis.com"]`, "[{number: 80, name: http, protocol: HTTP}]", "")},
			caller: caller("bookinfo"), callee: "storage.googleapis.com", port: 80,
			want: "Istio 3 (Istio default, ServiceEntry bookinfo/ext registers storage.googleapis.com (port 80 HTTP), no VirtualService binds it)"},
		{name: "a full wildcard host: refused by Istio's validation, names nothing", docs: []string{nsIstio, se("bookinfo", `["*"]`, "[{number: 80, name: http, protocol: HTTP}]", "")},
			caller: caller("bookinfo"), callee: "www.googleapis.com", port: 80},
		{name: "no protocol: sniffed, HTTP the worst", docs: []string{nsIstio, se("bookinfo", "[api.example.com]", "[{number: 8080, name: web}]", "")},
			caller: caller("bookinfo"), callee: "api.example.com", port: 8080,
			want: "Istio 3 (Istio default, ServiceEntry bookinfo/ext registers api.example.com (port 8080 (no protocol: sniffed)), no VirtualService binds it)"},
		{name: "exported to its own namespace only", docs: []string{nsIstio, se("other", "[www.googleapis.com]", "[{number: 80, name: http, protocol: HTTP}]", "\n  exportTo: [\".\"]")},
			caller: caller("bookinfo"), callee: "www.googleapis.com", port: 80},
		{name: "a caller outside the mesh: no sidecar, no layer", docs: []string{googleapis},
			caller: caller("bookinfo"), callee: "www.googleapis.com", port: 80},
		{name: "a VirtualService's http route does not take the app's TLS", docs: []string{nsIstio, googleapis, `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: g, namespace: bookinfo}
spec:
  hosts: [www.googleapis.com]
  http:
  - route: [{destination: {host: www.googleapis.com}}]
    retries: {attempts: 4}`},
			caller: caller("bookinfo"), callee: "www.googleapis.com", port: 443,
			want: "Istio 1 (Istio does not retry https port 443 HTTPS of host www.googleapis.com (ServiceEntry bookinfo/ext))"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join(c.docs, "\n---\n"))
			e := s.EdgePort(c.caller, c.callee, c.port)
			var got []string
			for _, l := range e.Layers {
				got = append(got, string(l.Kind)+" "+l.String())
			}
			if strings.Join(got, "; ") != c.want || strings.Join(e.Warnings, "; ") != c.warn {
				t.Fatalf("layers %q, warnings %q\nwant %q, %q", strings.Join(got, "; "), e.Warnings, c.want, c.warn)
			}
		})
	}
	if got := set(t, Options{}, googleapis).Counts()["ServiceEntry"]; got != 1 {
		t.Errorf("Counts()[ServiceEntry] = %d, want 1", got)
	}
}
