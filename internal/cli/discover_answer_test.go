package cli

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// answering serves Prometheus' /api/v1/query on loopback: body(query) is the answer to each
// query (Prometheus' JSON), so a test sets exactly the bytes and values discover reads.
func answering(t *testing.T, body func(query string) string) string {
	t.Helper()
	return "http://" + serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/api/v1/query" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		b := body(r.Form.Get("query"))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		fmt.Fprint(w, b)
	}))
}

// proxyAnswer answers retrycap-proxy's two queries with one edge, shop/order -> payment (10
// requests, 30 attempts), and every other query with no series.
func proxyAnswer(q string) string {
	const series = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"shop","service":"order","upstream":"payment"},"value":[1796213250,"%s"]}]}}`
	switch {
	case strings.Contains(q, "retrycap_proxy_requests_total"):
		return fmt.Sprintf(series, "10")
	case strings.Contains(q, "retrycap_proxy_attempts_total"):
		return fmt.Sprintf(series, "30")
	}
	return `{"status":"success","data":{"resultType":"vector","result":[]}}`
}

// TestDiscoverMaxAnswerSize: --prometheus-max-answer-size as a user gives it: the largest
// answer at exactly the bound is read, one byte over it fails naming the flag; 0, a negative
// and an unparseable size are refused naming the flag and the value before any query.
func TestDiscoverMaxAnswerSize(t *testing.T) {
	url := answering(t, proxyAnswer)
	largest := len(proxyAnswer("retrycap_proxy_attempts_total"))

	code, out, stderr := run(t, "", "discover", "--prometheus-url", url, "--prometheus-max-answer-size", strconv.Itoa(largest), "-o", "json")
	if code != 0 || !strings.Contains(out, `"upstream": "payment"`) || !strings.Contains(out, `"observedTries": 3`) {
		t.Fatalf("at the bound (%d bytes): exit %d\n%s\n%s", largest, code, out, stderr)
	}
	code, out, stderr = run(t, "", "discover", "--prometheus-url", url, "--prometheus-max-answer-size", strconv.Itoa(largest-1))
	want := fmt.Sprintf("retrycap: discover: Prometheus at %s: query sum by (namespace, service, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_requests_total[5m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 5m) unless resets(retrycap_proxy_requests_total[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(retrycap_proxy_requests_total[5m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 5m) unless resets(retrycap_proxy_requests_total[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(retrycap_proxy_requests_total offset 5m)) or increase(retrycap_proxy_requests_total[5m])): HTTP 200 from %s/api/v1/query: Content-Length %d: "+
		"the answer is over %d bytes, the bound on one answer (--prometheus-max-answer-size %d): refused, not read further (raise --prometheus-max-answer-size if the cluster's answers are this large)\n",
		url, url, largest, largest-1, largest-1)
	if code != ExitBadInput || out != "" || stderr != want {
		t.Fatalf("one byte under the answer: exit %d\n%s\ngot  %s\nwant %s", code, out, stderr, want)
	}
	// A quantity: 1Ki is far over these answers.
	if code, _, stderr = run(t, "", "discover", "--prometheus-url", url, "--prometheus-max-answer-size", "1Ki"); code != 0 {
		t.Fatalf("1Ki: exit %d: %s", code, stderr)
	}

	for arg, msg := range map[string]string{
		"0":    "want a size above 0 bytes (64Mi by default)",
		"-1Mi": "want a size above 0 bytes (64Mi by default)",
		"64MB": "not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)",
		"0.5":  "not a whole number of bytes",
	} {
		code, out, stderr = run(t, "", "discover", "--prometheus-url", url, "--prometheus-max-answer-size", arg)
		want := fmt.Sprintf("retrycap: invalid argument %q for \"--prometheus-max-answer-size\" flag: %s\n", arg, msg)
		if code != ExitBadInput || out != "" || stderr != want {
			t.Errorf("%s: exit %d\ngot  %q\nwant %q", arg, code, stderr, want)
		}
	}
}

// TestDiscoverRefusesWhatIsNotACount: discover as a user runs it, against answers that are
// not counts: each is exit 2 naming the Prometheus, the query, the series and the value, and
// nothing is printed as found. An extrapolated increase (not a whole number) is a count; a
// series that places no edge and a caller that maps to no workload of the manifests stay
// warnings beside the result.
func TestDiscoverRefusesWhatIsNotACount(t *testing.T) {
	const empty = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	vec := func(series ...string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(series, ",") + `]}}`
	}
	one := func(labels, value string) string {
		return `{"metric":` + labels + `,"value":[1796213250,"` + value + `"]}`
	}
	const order = `{"namespace":"shop","service":"order","upstream":"payment"}`
	const istioWeb = `{"reporter":"source","source_workload":"web","source_workload_namespace":"shop","destination_service_name":"payment","destination_service_namespace":"shop"}`
	const istioQ = "sum by (reporter, source_workload, source_workload_namespace, destination_service_name, destination_service_namespace, prometheus_replica, __replica__, cluster, exported_cluster, source_cluster) (((last_over_time(istio_requests_total[5m]) unless last_over_time(istio_requests_total[5m] offset 5m) unless resets(istio_requests_total[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(istio_requests_total[5m]) unless last_over_time(istio_requests_total[5m] offset 5m) unless resets(istio_requests_total[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(istio_requests_total offset 5m)) or increase(istio_requests_total[5m])) or sum by (reporter, source_workload, source_workload_namespace, destination_service_name, destination_service_namespace, prometheus_replica, __replica__, cluster, exported_cluster, source_cluster) (((last_over_time(workload:istio_requests_total[5m]) unless last_over_time(workload:istio_requests_total[5m] offset 5m) unless resets(workload:istio_requests_total[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(workload:istio_requests_total[5m]) unless last_over_time(workload:istio_requests_total[5m] offset 5m) unless resets(workload:istio_requests_total[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(workload:istio_requests_total offset 5m)) or increase(workload:istio_requests_total[5m]))"
	const proxyQ = "sum by (namespace, service, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_requests_total[5m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 5m) unless resets(retrycap_proxy_requests_total[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(retrycap_proxy_requests_total[5m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 5m) unless resets(retrycap_proxy_requests_total[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(retrycap_proxy_requests_total offset 5m)) or increase(retrycap_proxy_requests_total[5m]))"
	for _, tc := range []struct {
		name    string
		answers map[string]string // metric in the query -> answer
		want    string            // the error after "query "
	}{
		{"NaN", map[string]string{"istio_requests_total": vec(one(istioWeb, "NaN"))},
			istioQ + `: series {destination_service_name="payment", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"}: value NaN is not a counter's increase (want a number from 0 to 2^53)`},
		{"negative", map[string]string{"retrycap_proxy_requests_total": vec(one(order, "-4"))},
			proxyQ + `: series {namespace="shop", service="order", upstream="payment"}: value -4 is not a counter's increase (want a number from 0 to 2^53)`},
		{"+Inf", map[string]string{"retrycap_proxy_requests_total": vec(one(order, "+Inf"))},
			proxyQ + `: series {namespace="shop", service="order", upstream="payment"}: value +Inf is not a counter's increase (want a number from 0 to 2^53)`},
		{"a series twice with two values", map[string]string{"retrycap_proxy_requests_total": vec(one(order, "10"), one(order, "12"))},
			proxyQ + `: series {namespace="shop", service="order", upstream="payment"}: in the answer twice, with values 10 and 12 (an aggregation gives each label set once)`},
		{"a series twice with one value", map[string]string{"retrycap_proxy_requests_total": vec(one(order, "10"), one(order, "10"))},
			proxyQ + `: series {namespace="shop", service="order", upstream="payment"}: in the answer twice, with values 10 and 10 (an aggregation gives each label set once)`},
		{"Istio's series twice", map[string]string{"istio_requests_total": vec(one(istioWeb, "7"), one(istioWeb, "8"))},
			istioQ + `: series {destination_service_name="payment", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"}: in the answer twice, with values 7 and 8 (an aggregation gives each label set once)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := answering(t, func(q string) string {
				for m, a := range tc.answers {
					if strings.Contains(q, m+"[") {
						return a
					}
				}
				return empty
			})
			code, out, stderr := run(t, "", "discover", "--prometheus-url", url)
			want := "retrycap: discover: Prometheus at " + url + ": query " + tc.want + "\n"
			if code != ExitBadInput || out != "" || stderr != want {
				t.Fatalf("exit %d, stdout %q\ngot  %s\nwant %s", code, out, stderr, want)
			}
		})
	}

	t.Run("counts, with warnings beside", func(t *testing.T) {
		url := answering(t, func(q string) string {
			switch {
			case strings.Contains(q, "retrycap_proxy_requests_total["):
				return vec(one(order, "10.5"), one(`{"namespace":"shop","upstream":"payment"}`, "3"))
			case strings.Contains(q, "retrycap_proxy_attempts_total["):
				return vec(one(order, "31.5"))
			}
			return empty
		})
		dir := t.TempDir()
		manifest := filepath.Join(dir, "web.yaml")
		if err := os.WriteFile(manifest, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: web}]}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := run(t, "", "discover", "--prometheus-url", url, "-f", manifest, "-A", "-o", "json")
		want := `warning: retrycap: no namespace or no service label (the scrape adds them: docs/observe.md): not an edge: 1 series (e.g. {namespace="shop", upstream="payment"})
warning: retrycap: service shop/order maps to no workload of the manifests: listed as a Deployment of that name (kind inferred)
`
		if code != 0 || stderr != want || !strings.Contains(out, `"ratePerSecond": 0.035`) || !strings.Contains(out, `"observedTries": 3`) {
			t.Fatalf("exit %d\n%s\ngot  %s\nwant %s", code, out, stderr, want)
		}
	})
}
