package mesh

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// nginxSet adds docs to a Set: workloads as ingress-nginx controllers, the rest as manifests.
func nginxSet(t *testing.T, docs string) (*Set, error) {
	t.Helper()
	s := NewSet(Options{})
	for _, d := range strings.Split(docs, "\n---\n") {
		var err error
		if strings.Contains(d, "kind: Deployment") || strings.Contains(d, "kind: DaemonSet") {
			js, jerr := yaml.YAMLToJSON([]byte(d))
			if jerr != nil {
				t.Fatal(jerr)
			}
			_, err = s.AddIngressNginxController(js)
		} else {
			_, err = s.AddManifest([]byte(d))
		}
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// nginxCtrl is the static deploy.yaml's controller Deployment (kubernetes/ingress-nginx
// controller-v1.15.1 deploy/static/provider/cloud/deploy.yaml), its flags replaced by args.
func nginxCtrl(name, args string) string {
	if args == "" {
		args = "--controller-class=k8s.io/ingress-nginx, --ingress-class=nginx, --configmap=$(POD_NAMESPACE)/ingress-nginx-controller"
	}
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: ingress-nginx}\nspec:\n  template:\n    spec:\n      containers:\n" +
		"      - name: controller\n        image: registry.k8s.io/ingress-nginx/controller:v1.15.1\n        args: [/nginx-ingress-controller, --election-id=ingress-nginx-leader, " + args + "]\n" +
		"        env:\n        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}\n        - {name: OTHER, valueFrom: {secretKeyRef: {name: s, key: k}}}\n"
}

func nginxCM(ns, name, data string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\ndata: {" + data + "}\n"
}

const nextKey = `metadata.annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"]`

// TestIngressNginxConfigMap: the controller's ConfigMap sets the defaults the Ingress's
// annotations override. Before: NewDefault's 3 tries whatever the ConfigMap (tries 5: 3, a false
// green; off: 3, an overcount).
func TestIngressNginxConfigMap(t *testing.T) {
	frontend := ServiceRef{"shop", "frontend"}
	cm := "ConfigMap ingress-nginx/ingress-nginx-controller (the default of controller Deployment ingress-nginx/ingress-nginx-controller)"
	web := ing("web", "", "  ingressClassName: nginx\n")
	cases := []struct {
		name string
		docs string
		want Layer
	}{
		{
			name: "tries 5 in the ConfigMap: 5, not 3",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-next-upstream-tries: "5"`) + "---\n" + web,
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 5, Default: true,
				Note: cm + ` data.proxy-next-upstream-tries: "5", Ingress shop/web sets none (ingress-nginx, class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input)`},
		},
		{
			name: "ConfigMap before its controller: the same",
			docs: nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-next-upstream-tries: "5"`) + "---\n" + web + "---\n" + nginxCtrl("ingress-nginx-controller", ""),
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 5, Default: true,
				Note: cm + ` data.proxy-next-upstream-tries: "5", Ingress shop/web sets none (ingress-nginx, class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input)`},
		},
		{
			name: "off in the ConfigMap: 1 try",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-next-upstream: "off", proxy-next-upstream-tries: "0"`) + "---\n" + web,
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: nextKey, Tries: 1, Default: true,
				Note: cm + ` data.proxy-next-upstream: "off": no retries, Ingress shop/web sets none (ingress-nginx, class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input)`},
		},
		{
			name: "the Ingress's annotation overrides the ConfigMap's tries",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-next-upstream-tries: "5"`) + "---\n" +
				ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "2"`, "  ingressClassName: nginx\n"),
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 2,
				Note: `Ingress shop/web ` + triesKey + `: "2" (ingress-nginx, class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input)`},
		},
		{
			name: "the Ingress turns retries on where the ConfigMap says off: its tries",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-next-upstream: "off"`) + "---\n" +
				ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream: "error timeout", nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "4"`, "  ingressClassName: nginx\n"),
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 4,
				Note: `Ingress shop/web ` + triesKey + `: "4" (ingress-nginx, class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input)`},
		},
		{
			name: "the ConfigMap sets none: NewDefault's, said so",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ingress-nginx-controller, namespace: ingress-nginx}\ndata: null\n" + "---\n" + web,
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none and " + cm + " neither (class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input)"},
		},
		{
			name: "the ConfigMap named is not in the input: 3 assumed, said so",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + web,
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none (class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input; ConfigMap ingress-nginx/ingress-nginx-controller of controller Deployment ingress-nginx/ingress-nginx-controller not in the input: NewDefault's 3 tries assumed)"},
		},
		{
			name: "another ConfigMap than the one named: not read",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + nginxCM("shop", "ingress-nginx-controller", `proxy-next-upstream-tries: "5"`) + "---\n" + web,
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none (class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input; ConfigMap ingress-nginx/ingress-nginx-controller of controller Deployment ingress-nginx/ingress-nginx-controller not in the input: NewDefault's 3 tries assumed)"},
		},
		{
			name: "a controller without --configmap",
			docs: nginxCtrl("ingress-nginx-controller", "--ingress-class=nginx") + "---\n" + web,
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none (class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input; controller Deployment ingress-nginx/ingress-nginx-controller names no ConfigMap (--configmap): NewDefault's 3 tries)"},
		},
		{
			name: "a second controller class: its IngressClass, its ConfigMap (flag and value apart)",
			docs: nginxCtrl("ingress-nginx-controller", "") + "---\n" + nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-next-upstream-tries: "5"`) + "---\n" +
				nginxCtrl("internal", "--controller-class=k8s.io/internal-nginx, --configmap, ingress-nginx/internal") + "---\n" + nginxCM("ingress-nginx", "internal", `proxy-next-upstream-tries: "2", retry-non-idempotent: "true"`) + "---\n" +
				ingClass("internal", "k8s.io/internal-nginx", "") + "---\n" + ing("web", "", "  ingressClassName: internal\n"),
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 2, Default: true,
				Note: `ConfigMap ingress-nginx/internal (the default of controller Deployment ingress-nginx/internal) data.proxy-next-upstream-tries: "2", Ingress shop/web sets none (ingress-nginx, class internal); ConfigMap ingress-nginx/internal data.retry-non-idempotent: "true": POST, LOCK and PATCH are retried too`},
		},
		{
			name: "controllers elsewhere, none of this class: 3 assumed, said so",
			docs: nginxCtrl("internal", "--controller-class=k8s.io/internal-nginx, --ingress-class=internal") + "---\n" + web,
			want: Layer{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none (class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input; no ingress-nginx controller of this class in the input, so no ConfigMap: NewDefault's 3 tries assumed)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := nginxSet(t, tc.docs)
			if err != nil {
				t.Fatal(err)
			}
			got := s.Entry(frontend)
			if len(got.Layers) != 1 || !reflect.DeepEqual(got.Layers[0], tc.want) {
				t.Errorf("Entry(%s):\n got %#v\nwant %#v", frontend, got.Layers, tc.want)
			}
		})
	}
}

// TestIngressNginxConfigMapBad: a bad value of the ConfigMap a controller names is an error
// naming the ConfigMap, the key and the value, whichever is read first; an unnamed ConfigMap's
// keys are not checked.
func TestIngressNginxConfigMapBad(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`proxy-next-upstream-tries: "0"`, `ConfigMap ingress-nginx/ingress-nginx-controller data.proxy-next-upstream-tries: "0" is no limit in nginx (proxy_next_upstream_tries 0): unbounded tries to each backend of every Ingress the controller serves; set a number, or proxy-next-upstream: "off"`},
		{`proxy-next-upstream-tries: "five"`, `ConfigMap ingress-nginx/ingress-nginx-controller data.proxy-next-upstream-tries: "five" is not a whole number of tries (ingress-nginx's proxy-next-upstream-tries)`},
		{`proxy-read-timeout: "60s"`, `ConfigMap ingress-nginx/ingress-nginx-controller data.proxy-read-timeout: "60s" is not a whole number of seconds (ingress-nginx's proxy-read-timeout)`},
		{`retry-non-idempotent: "yes"`, `ConfigMap ingress-nginx/ingress-nginx-controller data.retry-non-idempotent: "yes" is not a boolean (ingress-nginx's retry-non-idempotent)`},
	} {
		cm := nginxCM("ingress-nginx", "ingress-nginx-controller", tc.data)
		if _, err := nginxSet(t, nginxCtrl("ingress-nginx-controller", "")+"---\n"+cm); err == nil || err.Error() != tc.want {
			t.Errorf("%s, ConfigMap last: error %v\nwant %s", tc.data, err, tc.want)
		}
		want := tc.want + ""
		want = strings.Replace(want, "ConfigMap ingress-nginx/ingress-nginx-controller ", "ConfigMap ingress-nginx/ingress-nginx-controller (read by Deployment ingress-nginx/ingress-nginx-controller --configmap): ConfigMap ingress-nginx/ingress-nginx-controller ", 1)
		if _, err := nginxSet(t, cm+"---\n"+nginxCtrl("ingress-nginx-controller", "")); err == nil || err.Error() != want {
			t.Errorf("%s, controller last: error %v\nwant %s", tc.data, err, want)
		}
		if _, err := nginxSet(t, nginxCM("shop", "app", tc.data)); err != nil {
			t.Errorf("%s in an unnamed ConfigMap: %v", tc.data, err)
		}
	}
}

// TestIngressNginxControllerFlags: the flags a controller is read by, and the errors naming the
// workload, the field and the value.
func TestIngressNginxControllerFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--configmap=ingress-nginx-controller", `Deployment ingress-nginx/c spec.template.spec.containers[0] --configmap: "ingress-nginx-controller" is not NAMESPACE/NAME, which ingress-nginx requires (it does not start)`},
		{"--configmap=$(OTHER)/cm", `Deployment ingress-nginx/c spec.template.spec.containers[0].args[2]: "--configmap=$(OTHER)/cm": $(OTHER) comes from outside the manifest (env OTHER of container controller is not a value or fieldRef metadata.namespace): retrycap cannot tell which ConfigMap the controller reads`},
		{"--configmap=$(NOPE)/cm", `Deployment ingress-nginx/c spec.template.spec.containers[0].args[2]: "--configmap=$(NOPE)/cm": $(NOPE) is not an env var of container controller: the kubelet leaves it as written`},
		{"--configmap", `Deployment ingress-nginx/c spec.template.spec.containers[0].args[2]: "--configmap" has no value`},
	} {
		if _, err := nginxSet(t, nginxCtrl("c", tc.args)); err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v\nwant %s", tc.args, err, tc.want)
		}
	}
	// Not a controller: no error, not added.
	s := NewSet(Options{})
	ok, err := s.AddIngressNginxController([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"},"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27","args":["--configmap=x"]}]}}}}`))
	if ok || err != nil {
		t.Errorf("plain nginx: %v, %v; want false, nil", ok, err)
	}
}

// TestIngressNginxRewriteConfigMap: the fix names the annotation and says the ConfigMap sets the
// default.
func TestIngressNginxRewriteConfigMap(t *testing.T) {
	s, err := nginxSet(t, nginxCtrl("ingress-nginx-controller", "")+"---\n"+nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-next-upstream-tries: "5"`)+"---\n"+ing("web", "", "  ingressClassName: nginx\n"))
	if err != nil {
		t.Fatal(err)
	}
	rw, err := PlanRewrite(s.Entry(ServiceRef{"shop", "frontend"}).Layers[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := `Ingress shop/web ` + triesKey + `: unset (5, the default ConfigMap ingress-nginx/ingress-nginx-controller sets) -> "2"`; rw.Suggestion != want {
		t.Errorf("Suggestion = %s\nwant %s", rw.Suggestion, want)
	}
}

// TestIngressNginxTime: per try the connect and read timeouts, overall proxy-next-upstream-timeout
// plus a try; the Ingress's annotations over the ConfigMap over NewDefault's. Before: no timeout
// at all (unbounded).
func TestIngressNginxTime(t *testing.T) {
	ctrl := nginxCtrl("ingress-nginx-controller", "") + "---\n"
	for _, tc := range []struct {
		name, docs string
		want       LayerTime
	}{
		{"NewDefault: 5s + 60s per try, no overall", ing("web", "", "  ingressClassName: nginx\n"),
			LayerTime{PerTry: 65 * time.Second, Source: "ingress-nginx defaults"}},
		{"the ConfigMap's", ctrl + nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-connect-timeout: "2", proxy-read-timeout: "10", proxy-next-upstream-timeout: "20"`) + "---\n" + ing("web", "", "  ingressClassName: nginx\n"),
			LayerTime{PerTry: 12 * time.Second, Timeout: 32 * time.Second, Source: "ConfigMap ingress-nginx/ingress-nginx-controller"}},
		{"the annotations over the ConfigMap's", ctrl + nginxCM("ingress-nginx", "ingress-nginx-controller", `proxy-connect-timeout: "2", proxy-read-timeout: "10"`) + "---\n" +
			ing("web", `nginx.ingress.kubernetes.io/proxy-read-timeout: "3", nginx.ingress.kubernetes.io/proxy-next-upstream-timeout: "5"`, "  ingressClassName: nginx\n"),
			LayerTime{PerTry: 5 * time.Second, Timeout: 10 * time.Second, Source: "Ingress shop/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := nginxSet(t, tc.docs)
			if err != nil {
				t.Fatal(err)
			}
			l := s.Entry(ServiceRef{"shop", "frontend"}).Layers[0]
			if got := s.LayerTime(l); got != tc.want {
				t.Errorf("LayerTime = %+v, want %+v", got, tc.want)
			}
		})
	}
	_, err := NewSet(Options{}).AddManifest([]byte(ing("web", `nginx.ingress.kubernetes.io/proxy-read-timeout: "1m"`, "  ingressClassName: nginx\n")))
	if want := `Ingress shop/web metadata.annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]: "1m" is not a whole number of seconds (ingress-nginx's proxy-read-timeout)`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
