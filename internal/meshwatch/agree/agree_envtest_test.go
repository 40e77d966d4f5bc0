package agree_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/analyze/kustomize"
	"github.com/retrycap/retrycap/internal/mesh/crds"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/publicdatatest"
)

// fileCase is an input of analyze's goldens (internal/cli/testdata) read by the controller and the
// gate too. Each runs in namespaces of its own: rename replaces a namespace name of the file.
type fileCase struct {
	name, file string    // file: a manifest file, or a kustomization's directory
	rename     [2]string // old, new; empty: as written
	// namespace, when set, is where the objects the file leaves in namespace default (or in
	// none, which analyze reads as default) go, the Namespace default renamed to it: the
	// cluster's default namespace is every case's.
	namespace string
	// gateSkip, when set, is why the gate's part may not agree yet: a mismatch then skips with
	// the reason and the gate's message instead of failing (the status part still must agree).
	gateSkip string
}

// fileCases are the inputs; a case may add itself from a file of its own (cycle_envtest_test.go).
var fileCases = []fileCase{
	// An Istio ingress Gateway's VirtualService is the entry's layer: 12 before #28, 36 now.
	{name: "ingress VirtualService (bookinfo)", file: "../../cli/testdata/mesh/bookinfo.yaml"},
	// istioctl kube-inject output in a namespace without Istio's label: meshed all the same.
	{name: "istioctl kube-inject'ed", file: "../../cli/testdata/inputs/injected.yaml", rename: [2]string{"shop", "shop-injected"}},
	// Istio alone (no Linkerd API): redis-cart's only port is tcp-redis, which Istio does not
	// retry: 3 x 3 x 1 = 9. The status said 27 while the watcher read Services with Linkerd only.
	{name: "a TCP-only callee under Istio (Online Boutique)", file: "../../cli/testdata/inputs/boutique-istio.yaml"},
}

// moreCases are cases with steps of their own, added from their files (barepod_envtest_test.go).
var moreCases []struct {
	name string
	run  func(*testing.T, *operatortest.Operator)
}

// TestAgree runs one manager (one per process: controller names are unique) and reads each input
// through analyze, the status and the gate.
func TestAgree(t *testing.T) {
	paths, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	op := operatortest.Start(t, paths...)
	t.Run("new layers", func(t *testing.T) { newLayers(t, op) })
	for _, fc := range fileCases {
		t.Run(fc.name, func(t *testing.T) { agreeOnFile(t, op, fc) })
	}
	for _, mc := range moreCases {
		t.Run(mc.name, func(t *testing.T) { mc.run(t, op) })
	}
}

// agreeOnFile: the status of the file's one policy (created last, in Audit) has analyze's
// amplification, worst path, violations and fixes; then, the policy set to Reject, the gate
// refuses the worst path's last caller created again with analyze's chain and number.
func agreeOnFile(t *testing.T, op *operatortest.Operator, fc fileCase) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	input := readInput(t, fc)
	rep := analyzeInput(t, input)
	g.Expect(rep.Violations).NotTo(BeEmpty(), "every input here is over its cap")
	t.Logf("analyze: %d over cap %d on %v", rep.Amplification, rep.Cap, rep.WorstPath)

	var policy *unstructured.Unstructured
	var workloads []*unstructured.Unstructured
	objs := objects(t, input)
	namespaces := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			namespaces[u.GetName()] = true
			g.Expect(c.Create(ctx, u.DeepCopy())).To(Succeed())
		}
	}
	for _, u := range objs {
		if ns := u.GetNamespace(); ns != "" && !namespaces[ns] {
			nsObj := &unstructured.Unstructured{}
			nsObj.SetAPIVersion("v1")
			nsObj.SetKind("Namespace")
			nsObj.SetName(ns)
			g.Expect(c.Create(ctx, nsObj)).To(Succeed())
			namespaces[ns] = true
		}
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace":
		case "RetryPolicy":
			policy = u
		default:
			if u.GetKind() == "Deployment" {
				workloads = append(workloads, u)
			}
			g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
		}
	}
	g.Expect(policy).NotTo(BeNil())
	g.Expect(unstructured.SetNestedField(policy.Object, "Audit", "spec", "enforcement")).To(Succeed())
	g.Expect(c.Create(ctx, policy)).To(Succeed())

	type status struct {
		Amplification         int64
		Path                  string
		Messages, Suggestions []string
	}
	var want status
	want.Amplification, want.Path = rep.Amplification, strings.Join(rep.WorstPath, ">")
	for _, v := range rep.Violations {
		want.Messages = append(want.Messages, v.Message)
		want.Suggestions = append(want.Suggestions, v.Suggestion)
	}
	key := client.ObjectKeyFromObject(policy)
	g.Eventually(func() (status, error) {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, key, &p); err != nil {
			return status{}, err
		}
		s := status{Amplification: p.Status.Amplification, Path: p.Status.WorstPath}
		for _, v := range p.Status.Violations {
			s.Messages = append(s.Messages, v.Message)
			s.Suggestions = append(s.Suggestions, v.Suggestion)
		}
		return s, nil
	}).Should(Equal(want))

	// The gate: the worst path's last caller, deleted and created again under Reject.
	g.Expect(c.Get(ctx, key, policy)).To(Succeed())
	g.Expect(unstructured.SetNestedField(policy.Object, "Reject", "spec", "enforcement")).To(Succeed())
	g.Expect(c.Update(ctx, policy)).To(Succeed())
	caller := rep.WorstPath[len(rep.WorstPath)-2]
	var w *unstructured.Unstructured
	for _, u := range workloads {
		// The workload of service caller that declares upstreams (bookinfo's reviews-v2 is
		// service reviews through its app label).
		ann, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
		labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		if w == nil && ann["retrycap.dev/upstreams"] != "" && (u.GetName() == caller || labels["app"] == caller || labels["app.kubernetes.io/name"] == caller) {
			w = u
		}
	}
	g.Expect(w).NotTo(BeNil(), "a Deployment of service %s", caller)
	g.Expect(c.Delete(ctx, w.DeepCopy())).To(Succeed())
	// analyze's chain, as the gate writes it: without the client hop when the client makes one
	// attempt, through "> cap N".
	chain := rep.Violations[0].Message
	chain = chain[:strings.Index(chain, fmt.Sprintf("> cap %d", rep.Cap))+len(fmt.Sprintf("> cap %d", rep.Cap))]
	chain = strings.TrimPrefix(chain, "client -x1-> ")
	prefix := fmt.Sprintf(`admission webhook "gate.retrycap.dev" denied the request: RetryPolicy %s/%s: %s`, policy.GetNamespace(), policy.GetName(), chain)
	var got string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		err := c.Create(ctx, w.DeepCopy(), client.DryRunAll)
		got = ""
		if err != nil {
			got = err.Error()
		}
		if strings.HasPrefix(got, prefix) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling the gate, as Eventually does
	}
	if !strings.HasPrefix(got, prefix) {
		if fc.gateSkip != "" {
			t.Skipf("the gate does not agree yet (%s): got %q, want the prefix %q", fc.gateSkip, got, prefix)
		}
		t.Fatalf("the gate says %q, want the prefix %q", got, prefix)
	}
	t.Logf("gate: %s", got)
}

// readInput is fc's input: its file, or its kustomization built as analyze -k builds it, renamed.
func readInput(t *testing.T, fc fileCase) string {
	t.Helper()
	file := publicdatatest.Dir(t, fc.file) // a directory listing public projects' module files: assembled
	raw, err := os.ReadFile(file)
	if fi, serr := os.Stat(file); serr == nil && fi.IsDir() {
		raw, err = kustomize.Build(file) // a kustomization, as analyze -k reads it
	}
	if err != nil {
		t.Fatalf("reading %s: %v", fc.file, err)
	}
	input := string(raw)
	if fc.rename[0] != "" {
		input = strings.ReplaceAll(input, fc.rename[0], fc.rename[1])
	}
	if fc.namespace != "" {
		input = outOfDefault(t, input, fc.namespace)
	}
	return input
}

// outOfDefault is docs with the Namespace default renamed ns and every other object of namespace
// default (or of none) put in ns.
func outOfDefault(t *testing.T, docs, ns string) string {
	t.Helper()
	var out []string
	for _, u := range objects(t, docs) {
		switch {
		case u.GetKind() == "Namespace" && u.GetName() == "default":
			u.SetName(ns)
		case u.GetKind() != "Namespace" && (u.GetNamespace() == "" || u.GetNamespace() == "default"):
			u.SetNamespace(ns)
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(data))
	}
	return strings.Join(out, "\n---\n")
}
