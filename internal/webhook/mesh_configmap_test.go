package webhook

import (
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
)

func meshConfigYAML(name, labels, mesh string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata: {name: ` + name + `, namespace: istio-system` + labels + `}
data:
  mesh: |
` + mesh
}

func nginxConfigMapYAML(data string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata: {name: ingress-nginx-controller, namespace: ingress-nginx}
data: {` + data + `}
`
}

// nginxFront is ingress-nginx's controller (reading ingress-nginx/ingress-nginx-controller), its
// IngressClass nginx and Ingress bookinfo/web to productpage.
var nginxFront = []string{`apiVersion: apps/v1
kind: Deployment
metadata: {name: ingress-nginx-controller, namespace: ingress-nginx}
spec:
  template:
    spec:
      containers:
      - name: controller
        image: registry.k8s.io/ingress-nginx/controller:v1.15.1
        args: [/nginx-ingress-controller, --configmap=ingress-nginx/ingress-nginx-controller]
`, `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
`, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: bookinfo}
spec:
  ingressClassName: nginx
  rules:
  - http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: productpage, port: {number: 80}}}}
`}

// TestDecideMeshConfigMap: a MeshConfig's or an ingress-nginx ConfigMap's write judged as a
// VirtualService is, named by the ConfigMap and the keys changed (old -> new); never rewritten.
func TestDecideMeshConfigMap(t *testing.T) {
	istioNS := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, labels: {istio-injection: enabled}}`
	attempts := func(n string) string { return "    defaultHttpRetryPolicy: {attempts: " + n + "}\n" }
	slow := timedMeshPolicy(100, v1alpha1.EnforcementReject, 20*time.Second)
	slow.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute} // bounds no hop: the mesh's timeouts do
	const over16 = "ConfigMap istio-system/istio data[\"mesh\"] defaultHttpRetryPolicy.attempts: unset -> 3 makes productpage -x4-> reviews -x4-> ratings = 16 > cap 10; ConfigMap istio-system/istio may keep defaultHttpRetryPolicy.attempts: 2"
	for _, tc := range []struct {
		name        string
		cluster     []string
		policies    []*v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		{
			name: "Istio: 3 default retries make 4 x 4 = 16 > 10", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, v1alpha1.EnforcementReject)},
			object:   meshConfigYAML("istio", "", attempts("3")),
			want:     MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: " + over16},
		},
		{
			name: "Istio: the strictest policy named, the others after it", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("b", 12, ""), meshPolicy("a", 10, v1alpha1.EnforcementReject)},
			object:   meshConfigYAML("istio", "", attempts("3")),
			want:     MeshDecision{Message: "RetryPolicy bookinfo/a: " + over16 + "; also over the cap of RetryPolicy bookinfo/b (cap 12)"},
		},
		{
			name: "Istio: Rewrite refuses (a ConfigMap is never rewritten)", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, v1alpha1.EnforcementRewrite)},
			object:   meshConfigYAML("istio", "", attempts("3")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: " + over16 +
				" (refused although enforcement is Rewrite: retrycap does not rewrite a ConfigMap, whose owner would write it back; lower the value)"},
		},
		{
			name: "Istio: Audit warns", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, v1alpha1.EnforcementAudit)},
			object:   meshConfigYAML("istio", "", attempts("3")),
			want:     MeshDecision{Allowed: true, Warnings: []string{"RetryPolicy bookinfo/bookinfo: " + over16 + " (admitted: enforcement is Audit)"}},
		},
		{
			name: "Istio: a lowering passes, even over the cap", cluster: []string{istioNS, meshConfigYAML("istio", "", attempts("5"))},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")},
			object:   meshConfigYAML("istio", "", attempts("4")), old: meshConfigYAML("istio", "", attempts("5")),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "Istio: a change of nothing read passes", cluster: []string{istioNS, meshConfigYAML("istio", "", attempts("5"))},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")},
			object:   meshConfigYAML("istio", ", labels: {team: mesh}", attempts("5")), old: meshConfigYAML("istio", "", attempts("5")),
			want: MeshDecision{Allowed: true},
		},
		{
			// The most of the revisions' MeshConfigs counts: a canary's 4 retries over istio's 1.
			name: "Istio: a revision's MeshConfig is judged with the others", cluster: []string{istioNS, meshConfigYAML("istio", "", attempts("1"))},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, "")},
			object:   meshConfigYAML("istio-canary", ", labels: {istio.io/rev: canary}", attempts("4")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: ConfigMap istio-system/istio-canary data[\"mesh\"] defaultHttpRetryPolicy.attempts: unset -> 4 makes " +
				"productpage -x5-> reviews -x5-> ratings = 25 > cap 10; ConfigMap istio-system/istio-canary may keep defaultHttpRetryPolicy.attempts: 2"},
		},
		{
			// istio's own 3 retries keep the chain over: the canary's value alone cannot fix it.
			// The advice names istio's MeshConfig and the cap (adv20; it said "lower the
			// chain's other layers or the callers' attempts", the callers at 1).
			name: "Istio: no value of the raised MeshConfig fits", cluster: []string{istioNS, meshConfigYAML("istio", "", attempts("3"))},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, "")},
			object:   meshConfigYAML("istio-canary", ", labels: {istio.io/rev: canary}", attempts("4")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: ConfigMap istio-system/istio-canary data[\"mesh\"] defaultHttpRetryPolicy.attempts: unset -> 4 makes " +
				"productpage -x5-> reviews -x5-> ratings = 25 > cap 10; even ConfigMap istio-system/istio-canary defaultHttpRetryPolicy.attempts: 0 does not fit: " +
				"lower ConfigMap istio-system/istio data.mesh (4 tries), or raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 10"},
		},
		{
			name: "Istio: a raised per-try timeout is judged against maxTimeToAnswer", cluster: []string{istioNS, meshConfigYAML("istio", "", "    defaultHttpRetryPolicy: {attempts: 1, perTryTimeout: 1s}\n")},
			policies: []*v1alpha1.RetryPolicy{slow},
			object:   meshConfigYAML("istio", "", "    defaultHttpRetryPolicy: {attempts: 1, perTryTimeout: 10s}\n"),
			old:      meshConfigYAML("istio", "", "    defaultHttpRetryPolicy: {attempts: 1, perTryTimeout: 1s}\n"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: ConfigMap istio-system/istio data[\"mesh\"] defaultHttpRetryPolicy.perTryTimeout: \"1s\" -> \"10s\" makes " +
				"productpage 20.025s -> reviews 20.025s -> ratings ? = 20.025s > maxTimeToAnswer 20s"},
		},
		{
			name: "Istio: a bad value names the ConfigMap, the field and the value", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, "")},
			object:   meshConfigYAML("istio", "", attempts("-1")),
			want:     MeshDecision{Message: "ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: -1 is negative"},
		},
		{
			name: "ingress-nginx: 5 tries make client -x5-> productpage = 5 > 4", cluster: append([]string{nginxConfigMapYAML(`proxy-next-upstream-tries: "3"`)}, nginxFront...),
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")},
			object:   nginxConfigMapYAML(`proxy-next-upstream-tries: "5"`), old: nginxConfigMapYAML(`proxy-next-upstream-tries: "3"`),
			want: MeshDecision{Message: `RetryPolicy bookinfo/bookinfo: ConfigMap ingress-nginx/ingress-nginx-controller data["proxy-next-upstream-tries"]: "3" -> "5" makes ` +
				"client -x5-> productpage -x1-> reviews -x1-> ratings = 5 > cap 4; ConfigMap ingress-nginx/ingress-nginx-controller may keep proxy-next-upstream-tries: \"4\""},
		},
		{
			name: "ingress-nginx: retries turned back on (off removed): 3 tries > 2", cluster: append([]string{nginxConfigMapYAML(`proxy-next-upstream: "off"`)}, nginxFront...),
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 2, "")},
			object:   nginxConfigMapYAML(``), old: nginxConfigMapYAML(`proxy-next-upstream: "off"`),
			want: MeshDecision{Message: `RetryPolicy bookinfo/bookinfo: ConfigMap ingress-nginx/ingress-nginx-controller data["proxy-next-upstream"]: "off" -> unset makes ` +
				"client -x3-> productpage -x1-> reviews -x1-> ratings = 3 > cap 2"},
		},
		{
			name: "ingress-nginx: within the cap passes", cluster: append([]string{nginxConfigMapYAML(`proxy-next-upstream-tries: "3"`)}, nginxFront...),
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")},
			object:   nginxConfigMapYAML(`proxy-next-upstream-tries: "4"`), old: nginxConfigMapYAML(`proxy-next-upstream-tries: "3"`),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "ingress-nginx: a bad value names the ConfigMap, the key and the value", cluster: append([]string{nginxConfigMapYAML(`proxy-next-upstream-tries: "3"`)}, nginxFront...),
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")},
			object:   nginxConfigMapYAML(`proxy-next-upstream-tries: "three"`), old: nginxConfigMapYAML(`proxy-next-upstream-tries: "3"`),
			want: MeshDecision{Message: `ConfigMap ingress-nginx/ingress-nginx-controller data.proxy-next-upstream-tries: "three" is not a whole number of tries (ingress-nginx's proxy-next-upstream-tries)`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			for _, y := range tc.cluster {
				add := set.AddJSON
				if strings.HasPrefix(y, "apiVersion: apps/v1") {
					add = set.AddIngressNginxController // as the watcher adds a workload
				}
				if _, err := add(jsonOf(t, y)); err != nil {
					t.Fatal(err)
				}
			}
			in := MeshInput{Policies: tc.policies, Workloads: bookinfoChain(), Set: set, Object: jsonOf(t, tc.object)}
			if tc.old != "" {
				in.Old = jsonOf(t, tc.old)
			}
			expectMeshDecision(t, DecideMeshConfigMap(in), tc.want)
		})
	}
}

// TestMeshConfigMapWebhook: the ConfigMap webhook's match condition names exactly the ConfigMaps
// read (Istio's MeshConfigs when Istio's API is read, the controllers' ConfigMaps), none without.
func TestMeshConfigMapWebhook(t *testing.T) {
	vs := meshwatch.API{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices", Kind: "VirtualService"}
	ing := meshwatch.API{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses", Kind: "Ingress"}
	fail := admissionregistrationv1.Ignore
	meshHook := admissionregistrationv1.MutatingWebhook{Name: MeshWebhookName, FailurePolicy: &fail,
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "linkerd-retries-on-services", Expression: "true"}}}
	if _, ok := MeshConfigMapWebhook([]meshwatch.API{ing}, nil, meshHook); ok {
		t.Error("a ConfigMap webhook with no ConfigMap read")
	}
	const istio = "(request.namespace == 'istio-system' && (request.name == 'istio' || (object != null && has(object.metadata.labels) && " +
		"'istio.io/rev' in object.metadata.labels && object.metadata.labels['istio.io/rev'] != 'default' && request.name == 'istio-' + object.metadata.labels['istio.io/rev'])))"
	for _, tc := range []struct {
		apis []meshwatch.API
		refs []string
		want string
	}{
		{[]meshwatch.API{vs, ing}, nil, istio},
		{[]meshwatch.API{ing}, []string{"a/b", "ingress-nginx/ingress-nginx-controller"}, `(request.namespace + '/' + request.name) in ["a/b", "ingress-nginx/ingress-nginx-controller"]`},
		{[]meshwatch.API{vs, ing}, []string{"a/b"}, istio + ` || (request.namespace + '/' + request.name) in ["a/b"]`},
	} {
		h, ok := MeshConfigMapWebhook(tc.apis, tc.refs, meshHook)
		if !ok || len(h.MatchConditions) != 1 || h.MatchConditions[0].Expression != tc.want {
			t.Errorf("%v %v: %v %+v, want %s", meshwatch.Names(tc.apis), tc.refs, ok, h.MatchConditions, tc.want)
			continue
		}
		ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
		if h.Name != MeshConfigMapWebhookName || *h.FailurePolicy != admissionregistrationv1.Ignore || len(h.Rules) != 1 ||
			!reflect.DeepEqual(h.Rules[0].Operations, ops) || !reflect.DeepEqual(h.Rules[0].Resources, []string{"configmaps"}) {
			t.Errorf("webhook %+v", h)
		}
		if meshHook.MatchConditions[0].Name != "linkerd-retries-on-services" || meshHook.Name != MeshWebhookName {
			t.Error("the mesh webhook was modified")
		}
	}
}
