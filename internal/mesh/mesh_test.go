package mesh

import (
	"reflect"
	"strings"
	"testing"
)

// set builds a Set from YAML documents separated by "---".
func set(t *testing.T, opts Options, docs string) *Set {
	t.Helper()
	s := NewSet(opts)
	for i, d := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		ok, err := s.AddManifest([]byte(d))
		if err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		if !ok {
			t.Fatalf("document %d: not read:\n%s", i+1, d)
		}
	}
	return s
}

const (
	nsIstio = `
apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, labels: {istio-injection: enabled}}`
	nsLinkerd = `
apiVersion: v1
kind: Namespace
metadata: {name: emojivoto, annotations: {linkerd.io/inject: enabled}}`
	nsPlain = `
apiVersion: v1
kind: Namespace
metadata: {name: plain}`
)

func caller(ns string, ann ...string) Caller {
	c := Caller{Name: "Deployment " + ns + "/productpage", Namespace: ns, Annotations: map[string]string{}}
	for i := 0; i+1 < len(ann); i += 2 {
		c.Annotations[ann[i]] = ann[i+1]
	}
	return c
}

// labelled is c with pod-template labels kv (key, value, ...).
func labelled(c Caller, kv ...string) Caller {
	c.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Labels[kv[i]] = kv[i+1]
	}
	return c
}

func vs(ns, name, body string) string {
	return "\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" + body
}

const istioNoVS = "Istio default, no VirtualService binds "

func TestEdge(t *testing.T) {
	two := int64(1)
	cases := []struct {
		name   string
		opts   Options
		docs   string
		caller Caller
		callee string
		want   Edge
	}{
		{
			name: "no mesh: no layers", docs: nsPlain, caller: caller("plain"), callee: "ratings",
			want: Edge{},
		},
		{
			name: "istio namespace label, no VirtualService: default 3 tries", docs: nsIstio, caller: caller("bookinfo"), callee: "reviews",
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "reviews"}}},
		},
		{
			name: "istio.io/rev label meshes the namespace", caller: caller("rev"), callee: "reviews",
			docs: "apiVersion: v1\nkind: Namespace\nmetadata: {name: rev, labels: {istio.io/rev: canary}}",
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "reviews"}}},
		},
		{
			name: "istio-injection=disabled wins over istio.io/rev", caller: caller("rev"), callee: "reviews",
			docs: "apiVersion: v1\nkind: Namespace\nmetadata: {name: rev, labels: {istio.io/rev: canary, istio-injection: disabled}}",
			want: Edge{},
		},
		{
			// Istio's webhooks select on pod labels only (IstioWillInject): on main this counted
			// a layer of 3 tries.
			name: "pod annotation inject true alone in a plain namespace: no sidecar", docs: nsPlain, caller: caller("plain", "sidecar.istio.io/inject", "true"), callee: "reviews",
			want: Edge{},
		},
		{
			name: "pod label inject true in a plain namespace", docs: nsPlain, caller: labelled(caller("plain"), "sidecar.istio.io/inject", "true"), callee: "reviews",
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "reviews"}}},
		},
		{
			name: "pod annotation inject false opts out", docs: nsIstio, caller: caller("bookinfo", "sidecar.istio.io/inject", "false"), callee: "reviews",
			want: Edge{},
		},
		{
			name: "VirtualService attempts 3: 4 tries", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings, subset: v1}}]\n    retries: {attempts: 3, perTryTimeout: 2s}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 4,
				Note: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3"}}},
		},
		{
			name: "attempts 0: 1 try", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 0}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 1,
				Note: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 0"}}},
		},
		{
			name: "retries without attempts: 1 try", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {perTryTimeout: 1s}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 1,
				Note: "VirtualService bookinfo/ratings spec.http[0].retries without attempts: no retries"}},
				Warnings: []string{`VirtualService bookinfo/ratings spec.http[0].retries.perTryTimeout: "1s" with no retries (attempts 0 or unset): Istio drops the retry policy and the per-try timeout with it: counted as no per-try timeout`}},
		},
		{
			name: "binding route without retries gets the default; several routes: the largest", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - match: [{headers: {end-user: {exact: jason}}}]\n    retries: {attempts: 1}\n  - route: [{destination: {host: ratings}}]"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[1].retries", Tries: 3, Default: true,
				Note: "Istio default, VirtualService bookinfo/ratings spec.http[1] sets no retries"}}},
		},
		{
			name: "several routes and several VirtualServices, subsets merged: the largest", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "reviews", "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews, subset: v1}}]\n    retries: {attempts: 1}\n  - route: [{destination: {host: reviews, subset: v2}}]\n    retries: {attempts: 5}") +
				"\n---\n" + vs("bookinfo", "reviews-b", "  hosts: [reviews.bookinfo.svc.cluster.local]\n  http:\n  - retries: {attempts: 4}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/reviews", FieldPath: "spec.http[1].retries.attempts", Tries: 6,
				Note: "VirtualService bookinfo/reviews spec.http[1].retries.attempts: 5"}}},
		},
		{
			name: "host form v.ns from another namespace's VirtualService", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("other", "r", "  hosts: [ratings.bookinfo]\n  http:\n  - retries: {attempts: 2}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService other/r", FieldPath: "spec.http[0].retries.attempts", Tries: 3,
				Note: "VirtualService other/r spec.http[0].retries.attempts: 2"}}},
		},
		{
			name: "host form v.ns.svc", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("other", "r", "  hosts: [ratings.bookinfo.svc]\n  http:\n  - retries: {attempts: 6}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService other/r", FieldPath: "spec.http[0].retries.attempts", Tries: 7,
				Note: "VirtualService other/r spec.http[0].retries.attempts: 6"}}},
		},
		{
			name: "short host resolves in the VirtualService's namespace: other/ratings is not bookinfo's ratings", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("other", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 9}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "ratings"}}},
		},
		{
			name: "short host of another namespace's VirtualService binds the callee v.other", caller: caller("bookinfo"), callee: "ratings.other",
			docs: nsIstio + "\n---\n" + vs("other", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 9}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService other/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 10,
				Note: "VirtualService other/ratings spec.http[0].retries.attempts: 9"}}},
		},
		{
			name: "callee in the long form", caller: caller("bookinfo"), callee: "ratings.bookinfo.svc.cluster.local",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 2}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 3,
				Note: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2"}}},
		},
		{
			name: "gateways without mesh: not for sidecars", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  gateways: [bookinfo-gateway]\n  http:\n  - retries: {attempts: 5}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "ratings"}}},
		},
		{
			name: "gateways containing mesh", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  gateways: [bookinfo-gateway, mesh]\n  http:\n  - retries: {attempts: 5}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 6,
				Note: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 5"}}},
		},
		{
			name: "a route whose matches name only a gateway is not for sidecars", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  gateways: [gw, mesh]\n  http:\n  - match: [{gateways: [gw]}]\n    retries: {attempts: 8}\n  - retries: {attempts: 1}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[1].retries.attempts", Tries: 2,
				Note: "VirtualService bookinfo/ratings spec.http[1].retries.attempts: 1"}}},
		},
		{
			name: "exportTo dot: not visible from another namespace", caller: caller("bookinfo"), callee: "ratings.other",
			docs: nsIstio + "\n---\n" + vs("other", "ratings", "  hosts: [ratings]\n  exportTo: [.]\n  http:\n  - retries: {attempts: 5}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "other/ratings"}}},
		},
		{
			name: "exportTo dot: visible in its own namespace", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  exportTo: [.]\n  http:\n  - retries: {attempts: 5}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 6,
				Note: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 5"}}},
		},
		{
			name: "exportTo a namespace name", caller: caller("bookinfo"), callee: "ratings.other",
			docs: nsIstio + "\n---\n" + vs("other", "ratings", "  hosts: [ratings]\n  exportTo: [shop, bookinfo]\n  http:\n  - retries: {attempts: 5}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService other/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 6,
				Note: "VirtualService other/ratings spec.http[0].retries.attempts: 5"}}},
		},
		{
			name: "exportTo star", caller: caller("bookinfo"), callee: "ratings.other",
			docs: nsIstio + "\n---\n" + vs("other", "ratings", "  hosts: [ratings]\n  exportTo: ['*']\n  http:\n  - retries: {attempts: 5}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService other/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 6,
				Note: "VirtualService other/ratings spec.http[0].retries.attempts: 5"}}},
		},
		{
			name: "wildcard host", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "all", "  hosts: ['*.bookinfo.svc.cluster.local']\n  http:\n  - retries: {attempts: 4}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/all", FieldPath: "spec.http[0].retries.attempts", Tries: 5,
				Note: "VirtualService bookinfo/all spec.http[0].retries.attempts: 4"}}},
		},
		{
			name: "external host: only a VirtualService naming it", caller: caller("bookinfo"), callee: "api.example.com",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ext", "  hosts: [api.example.com]\n  http:\n  - retries: {attempts: 2}"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/ext", FieldPath: "spec.http[0].retries.attempts", Tries: 3,
				Note: "VirtualService bookinfo/ext spec.http[0].retries.attempts: 2"}}},
		},
		{
			name: "external host without a VirtualService: no layer", docs: nsIstio, caller: caller("bookinfo"), callee: "api.example.com",
			want: Edge{},
		},
		{
			name: "MeshConfig defaultHttpRetryPolicy.attempts from istio-system/istio", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    accessLogFile: /dev/stdout\n    defaultHttpRetryPolicy:\n      attempts: 4\n",
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "ConfigMap istio-system/istio", FieldPath: "data.mesh", Tries: 5, Default: true,
				Note: "Istio default from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 4, no VirtualService binds reviews"}}},
		},
		{
			name: "MeshConfig without defaultHttpRetryPolicy: Istio's 2 retries", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    accessLogFile: /dev/stdout\n",
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "reviews"}}},
		},
		{
			name: "MeshConfig default also fills a binding route without retries", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultHttpRetryPolicy: {attempts: 0}\n" +
				"\n---\n" + vs("bookinfo", "reviews", "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews}}]"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "VirtualService bookinfo/reviews", FieldPath: "spec.http[0].retries", Tries: 1, Default: true,
				Note: "Istio default from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 0, VirtualService bookinfo/reviews spec.http[0] sets no retries"}}},
		},
		{
			name: "--istio-default-retries overrides MeshConfig", opts: Options{IstioDefaultRetries: &two}, caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultHttpRetryPolicy: {attempts: 4}\n",
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 2, Default: true, Note: "Istio default --istio-default-retries=1, no VirtualService binds reviews"}}},
		},
		{
			name: "Linkerd default: 1 try", docs: nsLinkerd, caller: caller("emojivoto"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Tries: 1, Default: true, Note: "Linkerd default, no retry annotations for emoji-svc"}}},
		},
		{
			name: "Linkerd pod-template annotation meshes the caller", docs: nsPlain + "\n---\n" + svc("plain", "emoji-svc", `retry.linkerd.io/limit: "2"`),
			caller: caller("plain", "linkerd.io/inject", "enabled"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "Service plain/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 3,
				Note: `Service plain/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "2"`}}},
		},
		{
			// linkerd/linkerd2 pkg/inject/report.go InjectEnabledValues: an ingress controller's
			// proxy (before: read as out of the mesh, its retries not counted).
			name: "Linkerd ingress mode meshes the caller", docs: nsPlain + "\n---\n" + svc("plain", "emoji-svc", `retry.linkerd.io/limit: "2"`),
			caller: caller("plain", "linkerd.io/inject", "ingress"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "Service plain/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 3,
				Note: `Service plain/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "2"`}}},
		},
		{
			name: "Linkerd pod-template disabled opts out", docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "2"`),
			caller: caller("emojivoto", "linkerd.io/inject", "disabled"), callee: "emoji-svc",
			want: Edge{},
		},
		{
			name: "Linkerd http without limit: limit 1", docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/http: 5xx`),
			caller: caller("emojivoto"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 2, Default: true,
				Note: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/http"]: "5xx" without retry.linkerd.io/limit: 1 retry`}}},
		},
		{
			name: "Linkerd grpc without limit: limit 1", docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/grpc: unavailable`),
			caller: caller("emojivoto"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 2, Default: true,
				Note: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/grpc"]: "unavailable" without retry.linkerd.io/limit: 1 retry`}}},
		},
		{
			name: `Linkerd limit "0": 1 retry, warned`, docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/http: 5xx`+"\n    "+`retry.linkerd.io/limit: "0"`),
			caller: caller("emojivoto"), callee: "emoji-svc",
			want: Edge{
				Layers: []Layer{{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 2, Default: true,
					Note: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "0", treated as unset by Linkerd: 1 retry`}},
				Warnings: []string{`Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "0" is treated by Linkerd as unset: counted as 1 retry`},
			},
		},
		{
			// policy-controller/k8s/index/src/outbound/index/http.rs parse_http_retry: a retry
			// timeout alone is a retry policy, limit.unwrap_or(1).
			name: "Linkerd retry timeout without limit: limit 1", docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/timeout: 300ms`),
			caller: caller("emojivoto"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 2, Default: true,
				Note: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/timeout"]: "300ms" without retry.linkerd.io/limit: 1 retry`}}},
		},
		{
			// A zero timeout is filtered out before that test (.filter(|v| *v != ZERO)).
			name: "Linkerd zero retry timeout alone: no retry", docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/timeout: 0s`),
			caller: caller("emojivoto"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Tries: 1, Default: true, Note: "Linkerd default, no retry annotations for emoji-svc"}}},
		},
		{
			// So is limit "0" (.filter(|v| *v != 0)): alone it leaves no retry policy at all.
			name: `Linkerd limit "0" alone: no retry`, docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "0"`),
			caller: caller("emojivoto"), callee: "emoji-svc",
			want: Edge{Layers: []Layer{{Kind: Linkerd, Tries: 1, Default: true, Note: "Linkerd default, no retry annotations for emoji-svc"}}},
		},
		{
			name: "Linkerd route annotations override the Service's", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "5"`) + "\n---\n" +
				routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "emoji-route", `retry.linkerd.io/limit: "1"`, "  parentRefs: [{group: '', kind: Service, name: emoji-svc, port: 8080}]\n  rules: [{backendRefs: [{name: emoji-svc, port: 8080}]}]"),
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "HTTPRoute emojivoto/emoji-route", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 2,
				Note: `HTTPRoute emojivoto/emoji-route metadata.annotations["retry.linkerd.io/limit"]: "1"`}}},
		},
		{
			name: "Linkerd GRPCRoute without annotations: the Service's apply", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "2"`) + "\n---\n" +
				routeDoc("gateway.networking.k8s.io/v1", "GRPCRoute", "emojivoto", "emoji-grpc", "", "  parentRefs: [{group: core, kind: Service, name: emoji-svc}]\n  rules: [{backendRefs: [{name: emoji-svc, port: 8080}]}]"),
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 3,
				Note: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "2"`}}},
		},
		{
			name: "Linkerd policy.linkerd.io HTTPRoute annotations", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + routeDoc("policy.linkerd.io/v1beta3", "HTTPRoute", "emojivoto", "r", `retry.linkerd.io/limit: "3"`, "  parentRefs: [{group: core, kind: Service, name: emoji-svc}]\n  rules: [{}]"),
			want: Edge{Layers: []Layer{{Kind: Linkerd, Object: "HTTPRoute emojivoto/r", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 4,
				Note: `HTTPRoute emojivoto/r metadata.annotations["retry.linkerd.io/limit"]: "3"`}}},
		},
		{
			name: "Linkerd ServiceProfile: annotations ignored, warned", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "2"`) +
				"\n---\napiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: emoji-svc.emojivoto.svc.cluster.local, namespace: emojivoto}\nspec:\n  routes: [{name: GET /, condition: {method: GET}, isRetryable: true}]",
			want: Edge{
				Layers: []Layer{{Kind: Linkerd, Object: "ServiceProfile emojivoto/emoji-svc.emojivoto.svc.cluster.local", Tries: 1, Default: true,
					Note: "Linkerd ServiceProfile emojivoto/emoji-svc.emojivoto.svc.cluster.local: retry annotations ignored, budget-bounded retries not counted"}},
				Warnings: []string{"Linkerd ServiceProfile emojivoto/emoji-svc.emojivoto.svc.cluster.local for emoji-svc: Linkerd ignores the retry.linkerd.io annotations and retries under the profile's budget: budget-bounded retries not counted"},
			},
		},
		{
			// Linkerd viz's own profiles (linkerd/linkerd2 viz/cmd/testdata/install_default.golden,
			// prometheus and metrics-api) name routes for metrics, none isRetryable: Linkerd retries
			// none (controller/api/destination/profile_translator.go passes IsRetryable per route).
			// Before: "retries under the profile's budget: budget-bounded retries not counted".
			name: "Linkerd ServiceProfile without an isRetryable route: no retries, said so", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "2"`) +
				"\n---\napiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: emoji-svc.emojivoto.svc.cluster.local, namespace: emojivoto}\nspec:\n  routes: [{name: POST /api/v1/query, condition: {method: POST, pathRegex: /api/v1/query}}, {name: GET /, condition: {method: GET}, isRetryable: false}]",
			want: Edge{
				Layers: []Layer{{Kind: Linkerd, Object: "ServiceProfile emojivoto/emoji-svc.emojivoto.svc.cluster.local", Tries: 1, Default: true,
					Note: "Linkerd ServiceProfile emojivoto/emoji-svc.emojivoto.svc.cluster.local: no route isRetryable, no retries (retry annotations ignored)"}},
				Warnings: []string{"Linkerd ServiceProfile emojivoto/emoji-svc.emojivoto.svc.cluster.local for emoji-svc has no isRetryable route: Linkerd retries none of its requests and ignores the retry.linkerd.io annotations"},
			},
		},
		{
			name: "caller in both meshes: Istio counts, warned", caller: labelled(caller("emojivoto"), "sidecar.istio.io/inject", "true"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "5"`),
			want: Edge{
				Layers:   []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "emoji-svc"}},
				Warnings: []string{"Deployment emojivoto/productpage is in both Istio and Linkerd: counting Istio's layer (one sidecar captures the traffic)"},
			},
		},
		{
			name: "GAMMA HTTPRoute in Istio: 1 + retry.attempts, the largest rule", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "reviews", "",
				"  parentRefs: [{group: '', kind: Service, name: reviews, port: 9080}]\n  rules:\n  - backendRefs: [{name: reviews-v1, port: 9080}]\n    retry: {attempts: 1}\n  - backendRefs: [{name: reviews-v2, port: 9080}]\n    retry: {attempts: 4, codes: [503]}"),
			want: Edge{Layers: []Layer{{Kind: GAMMA, Object: "HTTPRoute bookinfo/reviews", FieldPath: "spec.rules[1].retry.attempts", Tries: 5, Unset: 3,
				Note: "HTTPRoute bookinfo/reviews spec.rules[1].retry.attempts: 4"}}},
		},
		{
			name: "GAMMA retry {}: 2 retries", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "reviews", "",
				"  parentRefs: [{group: '', kind: Service, name: reviews}]\n  rules:\n  - retry: {}"),
			want: Edge{Layers: []Layer{{Kind: GAMMA, Object: "HTTPRoute bookinfo/reviews", FieldPath: "spec.rules[0].retry.attempts", Tries: 3, Unset: 3, Default: true,
				Note: "HTTPRoute bookinfo/reviews spec.rules[0].retry without attempts: 2 retries"}}},
		},
		{
			name: "GAMMA rule without retry: the mesh's default", caller: caller("bookinfo"), callee: "reviews",
			opts: Options{IstioDefaultRetries: new(int64(4))},
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "GRPCRoute", "bookinfo", "reviews", "",
				"  parentRefs: [{group: '', kind: Service, name: reviews}]\n  rules:\n  - backendRefs: [{name: reviews}]"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "GRPCRoute bookinfo/reviews", FieldPath: "spec.rules[0].retry", Tries: 5, Unset: 5, Default: true,
				Note: "Istio default --istio-default-retries=4, GRPCRoute bookinfo/reviews spec.rules[0] sets no retry"}}},
		},
		{
			name: "GAMMA route in the caller's namespace (consumer route) binds; one in a third namespace does not", caller: caller("bookinfo"), callee: "ratings.other",
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "consumer", "",
				"  parentRefs: [{group: '', kind: Service, name: ratings, namespace: other}]\n  rules: [{retry: {attempts: 2}}]") + "\n---\n" +
				routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "third", "x", "", "  parentRefs: [{group: '', kind: Service, name: ratings, namespace: other}]\n  rules: [{retry: {attempts: 7}}]"),
			want: Edge{Layers: []Layer{{Kind: GAMMA, Object: "HTTPRoute bookinfo/consumer", FieldPath: "spec.rules[0].retry.attempts", Tries: 3, Unset: 3,
				Note: "HTTPRoute bookinfo/consumer spec.rules[0].retry.attempts: 2"}}},
		},
		{
			name: "GAMMA retry in Linkerd counts against the annotations: the larger", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "1"`) + "\n---\n" +
				routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "r", "", "  parentRefs: [{group: '', kind: Service, name: emoji-svc}]\n  rules: [{retry: {attempts: 3}}]"),
			want: Edge{Layers: []Layer{{Kind: GAMMA, Object: "HTTPRoute emojivoto/r", FieldPath: "spec.rules[0].retry.attempts", Tries: 4, Unset: 1,
				Note: "HTTPRoute emojivoto/r spec.rules[0].retry.attempts: 3", NoRuleTimes: true}}},
		},
		{
			name: "VirtualService and GAMMA route for one host: the larger, warned", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 3}") + "\n---\n" +
				routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "ratings", "", "  parentRefs: [{group: '', kind: Service, name: ratings}]\n  rules: [{retry: {attempts: 5}}]"),
			want: Edge{
				Layers: []Layer{{Kind: GAMMA, Object: "HTTPRoute bookinfo/ratings", FieldPath: "spec.rules[0].retry.attempts", Tries: 6, Unset: 3,
					Note: "HTTPRoute bookinfo/ratings spec.rules[0].retry.attempts: 5"}},
				Warnings: []string{"VirtualService bookinfo/ratings and HTTPRoute bookinfo/ratings both route ratings: counting the larger, 6 tries"},
			},
		},
		{
			name: "a Gateway-parented route is not a mesh layer", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "north", "", "  parentRefs: [{name: gw}]\n  rules: [{backendRefs: [{name: ratings}], retry: {attempts: 5}}]"),
			want: Edge{Layers: []Layer{{Kind: Istio, Tries: 3, Default: true, Note: istioNoVS + "ratings"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, tc.opts, tc.docs)
			got := s.Edge(tc.caller, tc.callee)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Edge(%s, %q):\n got %#v\nwant %#v", tc.caller.Namespace, tc.callee, got, tc.want)
			}
		})
	}
}

func svc(ns, name, annotations string) string {
	return "\napiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n  annotations:\n    " + annotations + "\nspec:\n  selector: {app: " + name + "}"
}

func routeDoc(apiVersion, kind, ns, name, annotations, spec string) string {
	m := "\napiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n"
	if annotations != "" {
		m += "  annotations:\n    " + annotations + "\n"
	}
	return m + "spec:\n" + spec
}
