package prometheus

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"
)

// TestDocumentedRelabelings runs the relabelings docs/observe.md gives for the proxies'
// PodMonitor through Prometheus' own relabelling (model/relabel) over the discovery labels of
// the pods of each workload kind: the service label is the graph's name for the workload (the
// retrycap.dev/service annotation, else app.kubernetes.io/name, else the workload's name).
func TestDocumentedRelabelings(t *testing.T) {
	doc, err := os.ReadFile("../../docs/observe.md")
	if err != nil {
		t.Fatal(err)
	}
	// The block after "relabelings:" up to the fence's end, as the Prometheus Operator writes
	// it; the same rules in a scrape configuration's keys.
	_, block, ok := strings.Cut(string(doc), "  relabelings:\n")
	if !ok {
		t.Fatal("docs/observe.md: no relabelings block")
	}
	block, _, _ = strings.Cut(block, "  ```")
	block = strings.NewReplacer("sourceLabels:", "source_labels:", "targetLabel:", "target_label:").Replace(block)
	var cfgs []*relabel.Config
	if err := yaml.UnmarshalStrict([]byte(block), &cfgs); err != nil {
		t.Fatalf("docs/observe.md relabelings: %v\n%s", err, block)
	}
	if len(cfgs) != 6 {
		t.Fatalf("docs/observe.md: %d relabelings, want 6", len(cfgs))
	}
	for i, c := range cfgs {
		if err := c.Validate(model.UTF8Validation); err != nil {
			t.Fatalf("relabeling %d: %v", i, err)
		}
	}
	for _, tc := range []struct {
		name string
		lbls map[string]string
		want string
	}{
		{"a Deployment's pod", map[string]string{"__meta_kubernetes_pod_name": "order-7d9f8c6b5-x2x4z",
			"__meta_kubernetes_pod_controller_kind": "ReplicaSet", "__meta_kubernetes_pod_controller_name": "order-7d9f8c6b5",
			"__meta_kubernetes_pod_label_pod_template_hash": "7d9f8c6b5"}, "order"},
		{"a Deployment with dashes in its name", map[string]string{"__meta_kubernetes_pod_name": "payment-api-v2-5c7b9d4f8-abcde",
			"__meta_kubernetes_pod_controller_kind": "ReplicaSet", "__meta_kubernetes_pod_controller_name": "payment-api-v2-5c7b9d4f8",
			"__meta_kubernetes_pod_label_pod_template_hash": "5c7b9d4f8"}, "payment-api-v2"},
		{"a StatefulSet's pod", map[string]string{"__meta_kubernetes_pod_name": "ledger-0",
			"__meta_kubernetes_pod_controller_kind": "StatefulSet", "__meta_kubernetes_pod_controller_name": "ledger"}, "ledger"},
		{"a DaemonSet's pod", map[string]string{"__meta_kubernetes_pod_name": "agent-x7k2p",
			"__meta_kubernetes_pod_controller_kind": "DaemonSet", "__meta_kubernetes_pod_controller_name": "agent"}, "agent"},
		{"a bare pod", map[string]string{"__meta_kubernetes_pod_name": "debug"}, "debug"},
		{"a standalone ReplicaSet's pod (no pod-template-hash)", map[string]string{"__meta_kubernetes_pod_name": "legacy-api-m2v9c",
			"__meta_kubernetes_pod_controller_kind": "ReplicaSet", "__meta_kubernetes_pod_controller_name": "legacy-api"}, "legacy-api"},
		{"a Deployment's pod (pod-template-hash)", map[string]string{"__meta_kubernetes_pod_name": "legacy-api-5c7b9d4f8-abcde",
			"__meta_kubernetes_pod_controller_kind": "ReplicaSet", "__meta_kubernetes_pod_controller_name": "legacy-api-5c7b9d4f8",
			"__meta_kubernetes_pod_label_pod_template_hash": "5c7b9d4f8"}, "legacy-api"},
		{"a Job's pod", map[string]string{"__meta_kubernetes_pod_name": "migrate-v2-q8z4n",
			"__meta_kubernetes_pod_controller_kind": "Job", "__meta_kubernetes_pod_controller_name": "migrate-v2"}, "migrate-v2"},
		{"a CronJob's pod (its Job: CRONJOB-<scheduled minute>)", map[string]string{"__meta_kubernetes_pod_name": "nightly-report-29412345-x7k2p",
			"__meta_kubernetes_pod_controller_kind": "Job", "__meta_kubernetes_pod_controller_name": "nightly-report-29412345"}, "nightly-report"},
		{"a Job whose suffix has 7 digits", map[string]string{"__meta_kubernetes_pod_name": "nightly-2941234-x7k2p",
			"__meta_kubernetes_pod_controller_kind": "Job", "__meta_kubernetes_pod_controller_name": "nightly-2941234"}, "nightly-2941234"},
		{"the label over the name", map[string]string{"__meta_kubernetes_pod_name": "order-7d9f8c6b5-x2x4z",
			"__meta_kubernetes_pod_controller_kind": "ReplicaSet", "__meta_kubernetes_pod_controller_name": "order-7d9f8c6b5",
			"__meta_kubernetes_pod_label_app_kubernetes_io_name": "checkout"}, "checkout"},
		{"the annotation over the label", map[string]string{"__meta_kubernetes_pod_name": "order-7d9f8c6b5-x2x4z",
			"__meta_kubernetes_pod_controller_kind": "ReplicaSet", "__meta_kubernetes_pod_controller_name": "order-7d9f8c6b5",
			"__meta_kubernetes_pod_label_app_kubernetes_io_name": "checkout", "__meta_kubernetes_pod_annotation_retrycap_dev_service": "cart"}, "cart"},
		{"an empty label is no name", map[string]string{"__meta_kubernetes_pod_name": "ledger-1",
			"__meta_kubernetes_pod_controller_kind": "StatefulSet", "__meta_kubernetes_pod_controller_name": "ledger",
			"__meta_kubernetes_pod_label_app_kubernetes_io_name": ""}, "ledger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := labels.NewBuilder(labels.FromMap(tc.lbls))
			if !relabel.ProcessBuilder(lb, cfgs...) {
				t.Fatal("target dropped")
			}
			if got := lb.Get("service"); got != tc.want {
				t.Errorf("service %q, want %q (labels %v)", got, tc.want, lb.Labels())
			}
		})
	}
}
