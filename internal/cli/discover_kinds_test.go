package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// kindsManifests are batch workloads of every kind discover reads besides Deployments: two
// CronJobs (nightly's env names payment), a standalone Job and ReplicaSet, and a Job nightly
// made (its owner's: no workload of its own), with the Services they call.
const kindsManifests = `apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: batch}
spec:
  schedule: "0 2 * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {app: nightly}}
        spec:
          restartPolicy: Never
          containers:
          - name: app
            image: nightly
            env: [{name: PAYMENT, value: "http://payment:8080"}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report, namespace: batch}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {app: report}}
        spec:
          restartPolicy: Never
          containers: [{name: app, image: report}]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: nightly-29412345
  namespace: batch
  ownerReferences: [{apiVersion: batch/v1, kind: CronJob, name: nightly, uid: 0c5e2f1a-8d7b-4b43-9e0f-5b2a6c9d4e18, controller: true}]
spec:
  template:
    metadata: {labels: {app: nightly}}
    spec:
      restartPolicy: Never
      containers:
      - name: app
        image: nightly
        env: [{name: LEDGER, value: "http://ledger:8080"}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: batch}
spec:
  template:
    metadata: {labels: {app: migrate}}
    spec:
      restartPolicy: Never
      containers:
      - name: app
        image: migrate
        env: [{name: PAYMENT, value: "payment:8080"}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: legacy, namespace: batch}
spec:
  selector: {matchLabels: {app: legacy}}
  template:
    metadata: {labels: {app: legacy}}
    spec:
      containers:
      - name: app
        image: legacy
        env: [{name: CART, value: "cart.batch:8080"}]
---
apiVersion: v1
kind: Service
metadata: {name: payment, namespace: batch}
spec: {selector: {app: payment}, ports: [{name: http, port: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: batch}
spec: {selector: {app: cart}, ports: [{name: http, port: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: ledger, namespace: batch}
spec: {selector: {app: ledger}, ports: [{name: http, port: 8080}]}
`

// linkerdOutbound is one outbound response_total series as Linkerd's proxy exports it (the
// scrape adds namespace and the caller's kind label).
func linkerdOutbound(dst string, v int) string {
	return fmt.Sprintf(`response_total{direction="outbound",authority="%s.batch.svc.cluster.local:8080",target_addr="10.0.0.9:8080",target_ip="10.0.0.9",target_port="8080",tls="true",server_id="%s.batch.serviceaccount.identity.linkerd.cluster.local",dst_namespace="batch",dst_service=%q,dst_serviceaccount=%q,status_code="200",classification="success",grpc_status="",error=""} %d`+"\n", dst, dst, dst, dst, v)
}

// TestDiscoverKindsFromPrometheus: a real Prometheus scraping Linkerd proxies of a CronJob (its
// template injected by linkerd inject: cronjob=), a Job (k8s_job=, linkerd-viz's rename of
// proxy-job), a standalone ReplicaSet (replicaset=) and a CronJob's pod the proxy injector
// labelled with no kind, and Istio's series of a CronJob's pod (source_workload is the
// CronJob's name): each maps to its workload of the manifests, of its kind.
func TestDiscoverKindsFromPrometheus(t *testing.T) {
	linkerdTarget := func(dst string, per int) string {
		return serve(t, &exporter{lines: func(n int) string {
			return "# TYPE response_total counter\n" + linkerdOutbound(dst, per*n)
		}})
	}
	istio := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" + istioSeries("source", "report", "batch", "payment", "batch", "200", 3*n)
	}})
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: istio},
		{Addr: linkerdTarget("payment", 6), Labels: map[string]string{"namespace": "batch", "cronjob": "nightly", "pod": "nightly-29412345-x7k2p"}},
		{Addr: linkerdTarget("payment", 2), Labels: map[string]string{"namespace": "batch", "k8s_job": "migrate", "pod": "migrate-q8z4n"}},
		{Addr: linkerdTarget("cart", 4), Labels: map[string]string{"namespace": "batch", "replicaset": "legacy", "pod": "legacy-m2v9c"}},
		{Addr: linkerdTarget("ledger", 1), Labels: map[string]string{"namespace": "batch", "pod": "nightly-29412346-b5r8t"}},
	})
	waitScrapes(t, prom, `min(count_over_time({__name__=~"istio_requests_total|response_total"}[1m]))`, 5)
	manifest := filepath.Join(t.TempDir(), "batch.yaml")
	if err := os.WriteFile(manifest, []byte(kindsManifests), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m", "-n", "batch", "-f", manifest, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res telemetry.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range res.Workloads {
		for _, p := range w.Discovered {
			got = append(got, fmt.Sprintf("%s %s/%s inferred=%t > %s %q notObserved=%t", w.Kind, w.Namespace, w.Name, w.KindInferred, p.Upstream, p.Sources, p.NotObserved))
		}
	}
	want := []string{
		`CronJob batch/nightly inferred=false > payment ["env PAYMENT (container app)" "linkerd"] notObserved=false`,
		`CronJob batch/report inferred=false > payment ["istio"] notObserved=false`,
		`Job batch/migrate inferred=false > payment ["env PAYMENT (container app)" "linkerd"] notObserved=false`,
		`ReplicaSet batch/legacy inferred=false > cart ["env CART (container app)" "linkerd"] notObserved=false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s\nstderr:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stderr)
	}
	wantWarn := `warning: linkerd response_total: no namespace, or none of deployment, statefulset, daemonset, replicaset, k8s_job, cronjob (the scrape's labels; Linkerd's proxy injector labels a CronJob's pod with none): not an edge: 1 series (e.g. {dst_namespace="batch", dst_service="ledger", namespace="batch"})`
	if strings.TrimSpace(stderr) != wantWarn {
		t.Errorf("stderr\n%s\nwant\n%s", stderr, wantWarn)
	}
}

// waitScrapes waits until every series q counts has at least n scrapes in the window.
func waitScrapes(t *testing.T, prom *promtest.Server, q string, n float64) {
	t.Helper()
	c, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(c)
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, _, _, err := papi.Query(context.Background(), q, time.Now())
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 && float64(vec[0].Value) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v scrapes: not within 60s (last: %v %v)", n, v, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// TestDiscoverPatchKindsApplied: discover's patches for a CronJob and a standalone ReplicaSet
// set the annotation where a real API server keeps their pod template (a CronJob's at
// spec.jobTemplate.spec.template) and apply with kubectl patch; a Job's says its template cannot
// change, and the API server agrees.
func TestDiscoverPatchKindsApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	manifest := filepath.Join(t.TempDir(), "batch.yaml")
	if err := os.WriteFile(manifest, []byte(kindsManifests), 0o600); err != nil {
		t.Fatal(err)
	}
	code, patches, stderr := run(t, "", "discover", "-f", manifest, "-n", "batch", "-o", "patch")
	if code != 0 {
		t.Fatalf("discover: exit %d: %s", code, stderr)
	}
	docs := strings.Split(patches, "\n---\n")
	var heads []string
	for _, d := range docs {
		heads = append(heads, strings.SplitN(d, "\n", 2)[0])
	}
	wantHeads := []string{
		`# CronJob batch/nightly: retrycap.dev/upstreams "payment", one try each (add =N where the app retries)`,
		`# Job batch/migrate: retrycap.dev/upstreams "payment", one try each (add =N where the app retries)`,
		`# ReplicaSet batch/legacy: retrycap.dev/upstreams "cart", one try each (add =N where the app retries)`,
	}
	if strings.Join(heads, "\n") != strings.Join(wantHeads, "\n") {
		t.Fatalf("patch heads:\n%s\nwant\n%s\nwhole:\n%s", strings.Join(heads, "\n"), strings.Join(wantHeads, "\n"), patches)
	}
	const wantCronJob = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
  namespace: batch
spec:
  jobTemplate:
    spec:
      template:
        metadata:
          annotations:
            retrycap.dev/upstreams: payment
`
	if !strings.HasSuffix(docs[0]+"\n", wantCronJob) { // the split took its newline
		t.Errorf("CronJob patch:\n%s\nwant it to end with\n%s", docs[0], wantCronJob)
	}
	if !strings.Contains(docs[1], "\n#   (a Job's pod template cannot change once it is created: patch its manifest, or recreate the Job)\n") {
		t.Errorf("Job patch without the note:\n%s", docs[1])
	}

	cp, ctx := startControlPlane(t, 2*time.Minute)
	if _, stderr, err := cp.RunKubectl(ctx, "", "create", "namespace", "batch"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// The Job nightly made names an owner that is not there: leave it out.
	var apply []string
	for _, d := range strings.Split(kindsManifests, "\n---\n") {
		if !strings.Contains(d, "ownerReferences") {
			apply = append(apply, d)
		}
	}
	if _, stderr, err := cp.RunKubectl(ctx, strings.Join(apply, "\n---\n"), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	patch := func(doc string) (string, error) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name, Namespace string }
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if err := yaml.Unmarshal(js, &obj); err != nil || obj.Kind == "" {
			t.Fatalf("not an object (%v):\n%s", err, doc)
		}
		_, stderr, err := cp.RunKubectl(ctx, "", "patch", strings.ToLower(obj.Kind), obj.Metadata.Name, "-n", obj.Metadata.Namespace, "--type", "merge", "-p", string(js))
		return stderr, err
	}
	for _, i := range []int{0, 2} {
		if stderr, err := patch(docs[i]); err != nil {
			t.Fatalf("kubectl patch:\n%s\n%v\n%s", docs[i], err, stderr)
		}
	}
	if stderr, err := patch(docs[1]); err == nil || !strings.Contains(stderr, "field is immutable") {
		t.Errorf("patching the Job: %v %s; want the API server's field is immutable", err, stderr)
	}
	for _, c := range []struct{ kind, name, path, want string }{
		{"cronjob", "nightly", `{.spec.jobTemplate.spec.template.metadata.annotations.retrycap\.dev/upstreams}`, "payment"},
		{"replicaset", "legacy", `{.spec.template.metadata.annotations.retrycap\.dev/upstreams}`, "cart"},
	} {
		out, stderr, err := cp.RunKubectl(ctx, "", "get", c.kind, c.name, "-n", "batch", "-o", "jsonpath="+c.path)
		if err != nil || out != c.want {
			t.Errorf("%s %s: %q (%v %s), want %q", c.kind, c.name, out, err, stderr, c.want)
		}
	}
}
