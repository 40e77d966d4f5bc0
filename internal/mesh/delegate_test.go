package mesh

import (
	"strings"
	"testing"
)

// A root VirtualService's route with a delegate takes the delegate's routes, each with the
// delegate's retries, else the root route's; a missing delegate, or one not exported to the
// root's namespace, drops the route (delegate.go). Before: the root route was read as one without
// retries (Istio's default), and at an ingress gateway it routed nowhere.
func TestDelegate(t *testing.T) {
	root := func(gateways, retries string) string {
		return vs("bookinfo", "root", "  hosts: [reviews]\n"+gateways+"  http:\n  - match: [{uri: {prefix: /api}}]\n"+retries+"    delegate: {name: reviews-api, namespace: team}\n")
	}
	delegate := func(exportTo, retries string) string {
		return vs("team", "reviews-api", exportTo+"  http:\n  - match: [{uri: {prefix: /api/v1}}]\n    route: [{destination: {host: reviews.bookinfo.svc.cluster.local}}]\n"+retries)
	}
	cases := []struct {
		name string
		docs []string
		want string
	}{
		{"the delegate's retries", []string{nsIstio, root("", ""), delegate("", "    retries: {attempts: 5}\n")},
			"Istio 6 (VirtualService team/reviews-api spec.http[0].retries.attempts: 5) at VirtualService team/reviews-api spec.http[0].retries.attempts"},
		{"the root's retries where the delegate sets none", []string{nsIstio, root("", "    retries: {attempts: 1}\n"), delegate("", "")},
			"Istio 2 (VirtualService bookinfo/root spec.http[0].retries.attempts: 1) at VirtualService bookinfo/root spec.http[0].retries.attempts"},
		{"neither: Istio's default, the delegate's route named", []string{nsIstio, root("", ""), delegate("", "")},
			"Istio 3 (Istio default, VirtualService team/reviews-api spec.http[0] sets no retries) at VirtualService team/reviews-api spec.http[0].retries"},
		{"a delegate not exported to the root's namespace drops the route", []string{nsIstio, root("", ""), delegate("  exportTo: ['.']\n", "    retries: {attempts: 5}\n")},
			"Istio 3 (Istio default, no VirtualService binds reviews)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join(c.docs, "\n---\n"))
			var got []string
			for _, l := range s.Edge(caller("bookinfo"), "reviews").Layers {
				g := string(l.Kind) + " " + l.String()
				if l.Object != "" {
					g += " at " + l.Object + " " + l.FieldPath
				}
				got = append(got, g)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q\nwant %q", strings.Join(got, "; "), c.want)
			}
		})
	}
	// At an ingress gateway: the entrypoint's client attempts take the delegate's retries.
	s := set(t, Options{}, strings.Join([]string{nsIstio, root("  gateways: [bookinfo-gateway]\n", ""), delegate("", "    retries: {attempts: 4}\n")}, "\n---\n"))
	e := s.Entry(ServiceRef{"bookinfo", "reviews"})
	if len(e.Layers) != 1 || e.Tries() != 5 || e.Layers[0].Object != "VirtualService team/reviews-api" {
		t.Fatalf("entry layers %+v, want one of 5 tries by VirtualService team/reviews-api", e.Layers)
	}
}
