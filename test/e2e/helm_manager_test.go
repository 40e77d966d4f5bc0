package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/promquery"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// Values the schema took and the manager refuses at start: the install succeeded, then every
// manager pod crash-looped, and with it the webhooks whose failurePolicy is Fail (the gate, the
// validator) denied every workload and policy. meshAPIs took any resource.group (`foo.bar`),
// prometheus.url anything after the scheme (a blank, port 99999), and a URL's own credentials
// beside prometheus.auth's. The schema now takes what the manager takes, checked here against
// the manager's own code (internal/meshwatch.ParseSelection, internal/promquery.New).
func TestHelmRefusesWhatTheManagerWould(t *testing.T) {
	const schema = "Error: values don't meet the specifications of the schema(s) in the following chart(s):\nretrycap:\n"
	names := make([]string, len(meshwatch.Candidates))
	for i, c := range meshwatch.Candidates {
		names[i] = "'" + c.Name() + "'"
	}
	urlPattern := `'^(https?://([^\\s/?#@]+@)?([^\\s/?#@:\\[\\]]+|\\[[0-9A-Fa-f:.]+\\])(:(0*[1-9][0-9]{0,3}|0*[1-5][0-9]{4}|0*6[0-4][0-9]{3}|0*65[0-4][0-9]{2}|0*655[0-2][0-9]|0*6553[0-5])?)?([/?#]\\S*)?)?$'`
	for set, want := range map[string]string{
		"meshAPIs={foo.bar}": schema + "- at '/meshAPIs/0': value must be one of " + strings.Join(names, ", ") + "\n",
		"meshAPIs={virtualservices.networking.istio.io,none}": schema + "- at '/meshAPIs/1': value must be one of " + strings.Join(names, ", ") + "\n",
		"prometheus.url=http://prometheus:9090 x":             schema + "- at '/prometheus/url': 'http://prometheus:9090 x' does not match pattern " + urlPattern + "\n",
		"prometheus.url=http://prometheus:99999":              schema + "- at '/prometheus/url': 'http://prometheus:99999' does not match pattern " + urlPattern + "\n",
		"prometheus.url=http:///api":                          schema + "- at '/prometheus/url': 'http:///api' does not match pattern " + urlPattern + "\n",
		"prometheus.url=https://u:p@prometheus:9091,prometheus.auth.secretName=prom,prometheus.auth.bearerTokenKey=token": "prometheus.url holds credentials (user:password@ before its host), and so does prometheus.auth (serviceAccountToken, bearerTokenKey, username or passwordKey): give them in one place",
		"prometheus.url=https://u:p@prometheus:9091,prometheus.auth.serviceAccountToken=true":                             "prometheus.url holds credentials (user:password@ before its host), and so does prometheus.auth (serviceAccountToken, bearerTokenKey, username or passwordKey): give them in one place",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		refused(t, "--set "+set, out, errOut, err, want)
	}

	// The manager refuses each URL the schema refuses, and takes each it takes.
	for url, ok := range map[string]bool{
		"http://prometheus:9090 x": false, "http://prometheus:99999": false, "http:///api": false,
		"http://prometheus.monitoring.svc:9090": true, "https://prometheus.monitoring.svc:9091/prom?x=1": true,
		"http://[::1]:9090": true, "http://10.0.0.1": true, "https://u:p@prometheus:9091": true, "http://prometheus:65535": true,
	} {
		if _, err := promquery.New(promquery.Options{URL: url}); (err == nil) != ok {
			t.Errorf("the manager on --prometheus-url %q: %v, the chart's schema takes it: %v", url, err, ok)
		}
		if !ok {
			continue
		}
		var dep appsv1.Deployment
		renderHelm(t, "--set", "prometheus.url="+url).get(t, "Deployment", "retrycap-controller-manager", &dep)
		if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--prometheus-url="+url) {
			t.Errorf("prometheus.url=%s rendered the args %q", url, args)
		}
	}
	for _, n := range meshwatch.Candidates {
		if _, err := meshwatch.ParseSelection(n.Name()); err != nil {
			t.Errorf("the manager refuses --mesh-apis=%s: %v", n.Name(), err)
		}
	}
	var dep appsv1.Deployment
	renderHelm(t, "--set", "meshAPIs={virtualservices.networking.istio.io,ingresses.networking.k8s.io}").get(t, "Deployment", "retrycap-controller-manager", &dep)
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--mesh-apis=virtualservices.networking.istio.io,ingresses.networking.k8s.io") {
		t.Errorf("meshAPIs rendered the args %q", args)
	}
	helmPrometheusLabels(t, schema)
}

// helmPrometheusLabels (mesgate20): prometheus.replicaLabels took any label name, and the
// manager stopped at start on one its queries read an edge by (`--prometheus-replica-label
// "service": a label the queries read an edge by (caller label "service")`), as on such a
// clusterLabels. The schema's list is the manager's (telemetry.EdgeLabels of the caller label
// the chart leaves at its default), each of them is refused by both, and a replica or cluster
// label the manager takes renders.
func helmPrometheusLabels(t *testing.T, schema string) {
	t.Helper()
	_, root := helmBinary(t)
	data, err := os.ReadFile(filepath.Join(root, "charts", "retrycap", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Properties struct {
			Prometheus struct {
				Properties map[string]struct {
					Items struct {
						If struct {
							Enum []string `json:"enum"`
						} `json:"if"`
					} `json:"items"`
				} `json:"properties"`
			} `json:"prometheus"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	edge := telemetry.EdgeLabels(promquery.DefaultCallerLabel)
	if len(edge) != 33 {
		t.Errorf("the manager's edge labels: %d, want 33 (%q)", len(edge), edge)
	}
	const url = "prometheus.url=http://prometheus.monitoring:9090,"
	for _, tc := range []struct{ value, flag, const_, err string }{
		{"replicaLabels", "--prometheus-replica-label",
			"not a label the manager reads an edge by in its queries (refused at start by --prometheus-replica-label: two edges would be read as the replicas of one)",
			`--prometheus-replica-label %q: a label the queries read an edge by (caller label "service"): two edges would be read as one's replicas`},
		{"clusterLabels", "--prometheus-cluster-label",
			"not a label the manager reads an edge by in its queries (refused at start by --prometheus-cluster-label: it names no cluster)",
			`--prometheus-cluster-label %q: a label the queries read an edge by (caller label "service"): it is no cluster's`},
	} {
		if got := values.Properties.Prometheus.Properties[tc.value].Items.If.Enum; !slices.Equal(got, edge) {
			t.Errorf("values.schema.json prometheus.%s refuses %q, the manager %q", tc.value, got, edge)
		}
		// Each, after one the manager takes, in one render: every one refused at its index.
		want := schema
		for i, l := range edge {
			want += fmt.Sprintf("- at '/prometheus/%s/%d': value must be '%s'\n", tc.value, i+1, tc.const_)
			o := promquery.Options{URL: "http://prometheus.monitoring:9090"}
			if tc.value == "replicaLabels" {
				o.ReplicaLabels = []string{"replica", l}
			} else {
				o.ClusterLabels = []string{"region", l}
			}
			if _, err := promquery.New(o); err == nil || err.Error() != fmt.Sprintf(tc.err, l) {
				t.Errorf("the manager on %s %s: %v, want %q", tc.flag, l, err, fmt.Sprintf(tc.err, l))
			}
		}
		first := "replica"
		if tc.value == "clusterLabels" {
			first = "region"
		}
		set := url + "prometheus." + tc.value + "={" + first + "," + strings.Join(edge, ",") + "}"
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		refused(t, "--set prometheus."+tc.value, out, errOut, err, want)

		// What both take renders as the flag.
		o := promquery.Options{URL: "http://prometheus.monitoring:9090"}
		if tc.value == "replicaLabels" {
			o.ReplicaLabels = []string{first, "prometheus_replica"}
		} else {
			o.ClusterLabels = []string{first, "k8s_cluster_name"}
		}
		if _, err := promquery.New(o); err != nil {
			t.Errorf("the manager refuses %s: %v", tc.value, err)
		}
		var dep appsv1.Deployment
		renderHelm(t, "--set", url+"prometheus."+tc.value+"={"+strings.Join(append(o.ReplicaLabels, o.ClusterLabels...), ",")+"}").get(t, "Deployment", "retrycap-controller-manager", &dep)
		for _, l := range append(o.ReplicaLabels, o.ClusterLabels...) {
			if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, tc.flag+"="+l) {
				t.Errorf("prometheus.%s rendered the args %q, want %s=%s", tc.value, args, tc.flag, l)
			}
		}
	}
}

// prometheus.interval and prometheus.window past 24h (cmd/manager's managerDurationMax): the
// schema's patterns took them, and the manager stopped at start (`--prometheus-interval 48h:
// want 0..24h`). Summed by the template, refused at render.
func TestHelmPrometheusDurationsAtMostADay(t *testing.T) {
	const url = "prometheus.url=http://prometheus.monitoring:9090,"
	for set, want := range map[string]string{
		"interval=24h":                     "",
		"interval=1440m":                   "",
		"window=23h59m60s":                 "",
		"interval=86400000ms":              "",
		"window=0000000000000001h":         "",
		"interval=24h1ms":                  "prometheus.interval 24h1ms: the manager takes at most 24h (--prometheus-interval) and would stop at start",
		"interval=1441m":                   "prometheus.interval 1441m: the manager takes at most 24h (--prometheus-interval) and would stop at start",
		"window=23h59m61s":                 "prometheus.window 23h59m61s: the manager takes at most 24h (--prometheus-window) and would stop at start",
		"window=99999999999h":              "prometheus.window 99999999999h: the manager takes at most 24h (--prometheus-window) and would stop at start",
		"interval=9999999999999999999999s": "prometheus.interval 9999999999999999999999s: the manager takes at most 24h (--prometheus-interval) and would stop at start",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", url+"prometheus."+set)
		if want != "" {
			refused(t, "--set prometheus."+set, out, errOut, err, want)
			continue
		}
		if err != nil {
			t.Errorf("--set prometheus.%s: %v\n%s", set, err, errOut)
		}
	}
}

// A request above its limit rendered, and the API server refused the Deployment after the CRDs
// and the cluster roles were created (`spec.template.spec.containers[0].resources.requests:
// Invalid value: "64Mi": must be less than or equal to memory limit of 32Mi`), a failed release
// left behind; lowering only resources.limits.memory below the default request is enough.
// Refused at render now, the quantities compared in their units.
func TestHelmResourcesRequestAboveLimit(t *testing.T) {
	const tail = ": the API server refuses a request above its limit (the Deployment, after the CRDs were created); lower the request or raise the limit"
	for set, want := range map[string]string{
		"resources.limits.memory=32Mi":                           "resources.requests.memory 64Mi is above resources.limits.memory 32Mi" + tail,
		"resources.limits.memory=1e3":                            "resources.requests.memory 64Mi is above resources.limits.memory 1e3" + tail,
		"resources.limits.memory=67108863":                       "resources.requests.memory 64Mi is above resources.limits.memory 67108863" + tail,
		"resources.requests.memory=1Gi":                          "resources.requests.memory 1Gi is above resources.limits.memory 512Mi" + tail,
		"resources.limits.cpu=10m":                               "resources.requests.cpu 50m is above resources.limits.cpu 10m" + tail,
		"resources.limits.cpu=0.299,resources.requests.cpu=300m": "resources.requests.cpu 300m is above resources.limits.cpu 0.299" + tail,
		"resources.limits.memory=64Mi":                           "",
		"resources.limits.memory=67108864":                       "",
		"resources.limits.memory=0.5Gi":                          "",
		"resources.limits.memory=1e9":                            "",
		"resources.limits.cpu=0.3,resources.requests.cpu=300m":   "",
		"resources.limits.cpu=0.05":                              "",
		"resources.limits=null":                                  "",
		"resources.requests=null":                                "",
	} {
		out, errOut, err := helmTemplate(t, installNamespace, "--set", set)
		if want != "" {
			refused(t, "--set "+set, out, errOut, err, want)
			continue
		}
		if err != nil {
			t.Errorf("--set %s: %v\n%s", set, err, errOut)
		}
	}
}
