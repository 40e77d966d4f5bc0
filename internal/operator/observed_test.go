package operator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/promquery"
)

func TestValidatePrometheus(t *testing.T) {
	for _, tc := range []struct {
		p    Prometheus
		want string
	}{
		{Prometheus{}, ""},
		{Prometheus{URL: "http://prometheus.monitoring:9090", Interval: time.Minute}, ""},
		{Prometheus{URL: "prometheus.monitoring:9090"}, `--prometheus-url "prometheus.monitoring:9090": want an http or https URL with a host`},
		{Prometheus{URL: "http://p:9090", CallerLabel: "app.kubernetes.io/name"}, `--prometheus-caller-label "app.kubernetes.io/name": not a Prometheus label name`},
		{Prometheus{URL: "http://p:9090", CallerLabel: "app", ReplicaLabels: []string{"app"}}, `--prometheus-replica-label "app": a label the queries read an edge by (caller label "app"): two edges would be read as one's replicas`},
		{Prometheus{URL: "http://p:9090", ReplicaLabels: []string{"replica", "replica"}}, `--prometheus-replica-label "replica": given twice`},
		{Prometheus{URL: "http://p:9090", ReplicaLabels: []string{""}}, `--prometheus-replica-label "": not a Prometheus label name`},
		{Prometheus{URL: "http://p:9090", ReplicaLabels: []string{"replica", "prometheus_replica"}}, ``},
		{Prometheus{URL: "http://p:9090", ClusterLabels: []string{"k8s.cluster"}}, `--prometheus-cluster-label "k8s.cluster": not a Prometheus label name`},
		{Prometheus{URL: "http://p:9090", ClusterLabels: []string{"source_workload"}}, `--prometheus-cluster-label "source_workload": a label the queries read an edge by (caller label "service"): it is no cluster's`},
		{Prometheus{URL: "http://p:9090", ReplicaLabels: []string{"replica"}, ClusterLabels: []string{"replica"}}, `--prometheus-cluster-label "replica": a replica label (--prometheus-replica-label): it is no cluster's`},
		{Prometheus{URL: "http://p:9090", ClusterLabels: []string{"cluster", "cluster"}}, `--prometheus-cluster-label "cluster": given twice`},
		{Prometheus{URL: "http://p:9090", ClusterLabels: []string{"k8s_cluster_name"}, Cluster: "east"}, ``},
		{Prometheus{URL: "http://p:9090", Interval: -time.Second}, "--prometheus-interval -1s: must be positive"},
		// Before: the defaults, 5m and 10s, silently.
		{Prometheus{URL: "http://p:9090", Window: -time.Minute}, "--prometheus-window -1m0s: must be positive"},
		{Prometheus{URL: "http://p:9090", Timeout: -time.Second}, "--prometheus-timeout -1s: must be positive"},
		// Before: a window under 1s was queried as [0s] (Prometheus refuses it) or [1s500ms],
		// and an interval of 1ns queried Prometheus without a pause.
		{Prometheus{URL: "http://p:9090", Window: time.Nanosecond}, "--prometheus-window 1ns: want whole seconds, at least 1s"},
		{Prometheus{URL: "http://p:9090", Window: 1500 * time.Millisecond}, "--prometheus-window 1.5s: want whole seconds, at least 1s"},
		{Prometheus{URL: "http://p:9090", Interval: time.Millisecond}, "--prometheus-interval 1ms: want at least 1s"},
		{Prometheus{URL: "http://p:9090", MaxAnswerBytes: -1}, "--prometheus-max-answer-size -1: want a size above 0 bytes"},
		{Prometheus{URL: "http://p:9090", MaxAnswerBytes: 128 << 20}, ""},
		{Prometheus{URL: "http://p:9090", Auth: promquery.Auth{Username: "retrycap"}}, `--prometheus-username "retrycap": --prometheus-password-file is required with it`},
		{Prometheus{URL: "https://p:9090", Auth: promquery.Auth{BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token", CAFile: "/nonexistent/ca.crt"}},
			`--prometheus-ca-file "/nonexistent/ca.crt": unable to read CA cert: unable to read file /nonexistent/ca.crt: open /nonexistent/ca.crt: no such file or directory`},
	} {
		err := Options{Prometheus: tc.p}.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Validate(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestPrometheusMaxAnswerSizeReachesTheClient: the manager's --prometheus-max-answer-size is the
// bound of its poller's client: an answer one byte over it fails the poll naming the flag.
func TestPrometheusMaxAnswerSizeReachesTheClient(t *testing.T) {
	const answer = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	for _, max := range []int64{int64(len(answer)), int64(len(answer) - 1)} {
		c, err := Prometheus{URL: srv.URL, MaxAnswerBytes: max}.client()
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Series(context.Background(), time.Now())
		want := ""
		if max < int64(len(answer)) {
			want = fmt.Sprintf("query sum by (namespace, service, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_attempts_total[5m]) unless last_over_time(retrycap_proxy_attempts_total[5m] offset 5m) unless resets(retrycap_proxy_attempts_total[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(retrycap_proxy_attempts_total[5m]) unless last_over_time(retrycap_proxy_attempts_total[5m] offset 5m) unless resets(retrycap_proxy_attempts_total[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(retrycap_proxy_attempts_total offset 5m)) or increase(retrycap_proxy_attempts_total[5m])): HTTP 200 from %s/api/v1/query: Content-Length %d: "+
				"the answer is over %d bytes, the bound on one answer (--prometheus-max-answer-size %d): refused, not read further (raise --prometheus-max-answer-size if the cluster's answers are this large)",
				srv.URL, len(answer), max, max)
		}
		if got := fmt.Sprint(err); (err == nil) != (want == "") || (err != nil && got != want) {
			t.Errorf("bound %d:\ngot  %v\nwant %s", max, err, want)
		}
	}
}

func TestValidateWebhookPort(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Webhooks: true, WebhookPort: 9443}, ""},
		{Options{Webhooks: true, WebhookPort: 65535}, ""},
		{Options{Webhooks: true, WebhookPort: 70000}, "--webhook-port 70000: want a port 1..65535"},
		{Options{Webhooks: true, WebhookPort: 0}, "--webhook-port 0: want a port 1..65535"},
		{Options{Webhooks: true, WebhookPort: -1}, "--webhook-port -1: want a port 1..65535"},
		{Options{Webhooks: false, WebhookPort: 0}, ""}, // no webhook server: the port is not used
	} {
		if got := fmt.Sprint(tc.o.Validate()); (tc.want == "" && got != "<nil>") || (tc.want != "" && got != tc.want) {
			t.Errorf("Validate(webhooks %v, port %d) = %s, want %q", tc.o.Webhooks, tc.o.WebhookPort, got, tc.want)
		}
	}
}

// TestValidateFlags: the manager's flags that were taken without a word. Each is refused,
// naming the flag and the value, before the manager starts.
func TestValidateFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"defaults", Options{ProxyImage: DefaultProxyImage, Namespace: "retrycap-system"}, ""},
		// Before: a negative lease timing was the default, silently.
		{"lease", Options{LeaderElection: true, LeaseDuration: -5 * time.Second}, "--leader-elect-lease-duration -5s: must be positive"},
		{"renew", Options{RenewDeadline: -time.Second}, "--leader-elect-renew-deadline -1s: must be positive"},
		{"retry", Options{RetryPeriod: -time.Second}, "--leader-elect-retry-period -1s: must be positive"},
		// Before: the default (1m) for a negative one; 1ns asked the API server without a pause.
		{"recheck negative", Options{MeshRecheck: -time.Second}, "--mesh-recheck-interval -1s: want at least 1s"},
		// Before: the webhooks' exemption and the lease were keyed on a name no namespace has.
		{"namespace", Options{Namespace: "Retrycap_System"}, `--namespace "Retrycap_System": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed`},
		{"lease namespace", Options{LeaderElectionNamespace: "a b"}, `--leader-election-namespace "a b": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed`},
		// Before: injected as written, every pod then refused by the API server or the kubelet.
		{"image", Options{ProxyImage: "retrycap/proxy: v1"}, `--proxy-image "retrycap/proxy: v1": want an image reference (no spaces)`},
		// Before: accepted, the listen failing only after the caches synced (exit 1).
		{"metrics", Options{MetricsAddr: "nope"}, `--metrics-bind-address "nope": want HOST:PORT, :PORT or 0 (off)`},
		{"probe port", Options{ProbeAddr: ":99999"}, `--health-probe-bind-address ":99999": want HOST:PORT, :PORT or 0 (off)`},
		{"pprof", Options{PprofAddr: "localhost"}, `--pprof-bind-address "localhost": want HOST:PORT, :PORT or 0 (off)`},
		{"addresses", Options{MetricsAddr: "0", ProbeAddr: ":8081", PprofAddr: "127.0.0.1:6060"}, ""},
		// Before: found when the webhook server started, after the caches synced (exit 1).
		{"cert dir", Options{Webhooks: true, WebhookPort: 9443, WebhookCertDir: "/nonexistent/certs"},
			`--webhook-cert-dir "/nonexistent/certs": stat /nonexistent/certs: no such file or directory (the webhook server reads tls.crt and tls.key there; --enable-webhooks=false runs without them)`},
		{"cert dir is a file", Options{Webhooks: true, WebhookPort: 9443, WebhookCertDir: "observed_test.go"},
			`--webhook-cert-dir "observed_test.go": not a directory (the webhook server reads tls.crt and tls.key there; --enable-webhooks=false runs without them)`},
		{"cert dir without webhooks", Options{WebhookCertDir: "/nonexistent/certs"}, ""},
		{"cert dir", Options{Webhooks: true, WebhookPort: 9443, WebhookCertDir: "."}, ""},
	} {
		got := fmt.Sprint(tc.o.Validate())
		if (tc.want == "" && got != "<nil>") || (tc.want != "" && got != tc.want) {
			t.Errorf("%s: Validate() = %s, want %q", tc.name, got, tc.want)
		}
	}
}
