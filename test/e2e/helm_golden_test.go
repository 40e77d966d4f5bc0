package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateHelmGolden = flag.Bool("update", false, "rewrite testdata/helm/*.yaml from the current helm template output")

// TestHelmTemplateGolden pins what `helm template` renders for the main value combinations, so
// that a change to a template shows in review as the change of the objects a user applies. The
// CRDs are left out (they are config/crd/bases verbatim: TestHelmChartMatchesKustomize), and so
// is the self-signed mode (its keys are new on every run: TestHelmValues checks it).
// go test ./test/e2e -run TestHelmTemplateGolden -update rewrites the files.
func TestHelmTemplateGolden(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults": nil,
		// Prometheus with every flag and a Secret's credentials, pinned images, scheduling.
		"prometheus-auth-scheduling": {"--set", strings.Join([]string{
			"prometheus.url=https://prometheus.monitoring.svc:9091", "prometheus.interval=30s", "prometheus.window=2m",
			"prometheus.maxAnswerSize=128Mi", "prometheus.cluster=prod-eu", "prometheus.replicaLabels={replica}",
			"prometheus.auth.secretName=prom-auth", "prometheus.auth.bearerTokenKey=token", "prometheus.auth.caKey=ca.crt",
			"image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			"priorityClassName=system-cluster-critical", `nodeSelector.kubernetes\.io/os=linux`,
			"tolerations[0].key=dedicated,tolerations[0].operator=Exists,tolerations[0].effect=NoSchedule",
			"imagePullSecrets[0].name=regcred", "replicas=3", "meshAPIs={virtualservices.networking.istio.io}",
		}, ",")},
		// The webhooks' failure policies turned, the CRDs not kept, the namespace rendered, no PDB.
		"failopen-gitops": {"--set", "webhooks.gate.failurePolicy=Ignore,webhooks.injector.failurePolicy=Fail,webhooks.timeoutSeconds=10,crds.keep=false,namespace.create=true,podDisruptionBudget.enabled=false,excludedNamespaces={kube-system,monitoring}"},
		// The Prometheus Operator's objects (the Grafana dashboard is config/grafana's JSON verbatim).
		"monitoring": {"--set", "monitoring.podMonitors.enabled=true,monitoring.podMonitors.labels.release=kube-prometheus-stack,monitoring.prometheusRule.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := helmTemplate(t, installNamespace, args...)
			if err != nil {
				t.Fatalf("helm template %v: %v\n%s", args, err, errOut)
			}
			var kept []string
			for _, doc := range strings.Split(out, "\n---\n") {
				doc = strings.TrimPrefix(doc, "---\n")
				if strings.TrimSpace(doc) != "" && !strings.Contains("\n"+doc, "\nkind: CustomResourceDefinition\n") {
					kept = append(kept, doc)
				}
			}
			got := strings.Join(append([]string{"# helm template retrycap charts/retrycap -n " + installNamespace}, args...), " ") + "\n# (the CRDs left out)\n---\n" + strings.Join(kept, "\n---\n")
			file := filepath.Join("testdata", "helm", name+".yaml")
			if *updateHelmGolden {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil { //nolint:gosec // a checked-in golden file
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test ./test/e2e -run TestHelmTemplateGolden -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("helm template %v differs from %s at %s\n(go test ./test/e2e -run TestHelmTemplateGolden -update rewrites it; review the diff)", args, file, firstDifference(got, string(want)))
			}
		})
	}
}
