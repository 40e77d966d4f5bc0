package controller

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// rowAge is the AGE column at the end of a kubectl row, the one value that depends on timing.
var rowAge = regexp.MustCompile(`(?m)[0-9]+[smh]$`)

// storedStatus is the status as the API server stores it (not as the Go type reads it back,
// where an absent number is 0).
func storedStatus(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) map[string]any {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	Expect(k8sClient.Get(ctx, key, u)).To(Succeed())
	s, _, err := unstructured.NestedMap(u.Object, "status")
	Expect(err).NotTo(HaveOccurred())
	return s
}

// reconcileTotal is controller-runtime's count of the named controller's reconciles, scraped.
func reconcileTotal(controller string) (int, error) {
	body, err := scrapeMetrics()
	if err != nil {
		return 0, err
	}
	n := 0
	prefix := `controller_runtime_reconcile_total{controller="` + controller + `",result="`
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		v, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		n += v
	}
	return n, nil
}

// table is kubectl's table output as cells, cut where the header's columns start (a cell may be
// empty or hold a space, so the row cannot be split on blanks), the AGE column's values as
// <age>.
func table(out string) [][]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	starts := []int{}
	for _, m := range regexp.MustCompile(`\S+( \S+)*`).FindAllStringIndex(lines[0], -1) {
		starts = append(starts, m[0])
	}
	var rows [][]string
	for _, l := range lines {
		var row []string
		for i, st := range starts {
			end := len(l)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(l))
			}
			cell := ""
			if st < len(l) {
				cell = strings.TrimSpace(l[st:end])
			}
			if i < len(lines[0]) && strings.HasPrefix(lines[0][st:], "AGE") && len(rows) > 0 {
				cell = rowAge.ReplaceAllString(cell, "<age>")
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

var _ = Describe("status as the user reads it", func() {
	ctx := context.Background()

	// status.services, .edges and .amplification have no omitempty ("an empty graph shows 0,
	// not nothing"), but the status patch was the difference from the stored status read into
	// the Go type, where the absent fields are already 0: a policy that never had a graph never
	// got them, and kubectl's AMPLIFICATION column was empty for it, while the same state
	// reached from a graph showed 0.
	It("writes services, edges and amplification on the first status, even at 0", func() {
		const ns = "zero-status"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, policy(ns, "empty", 3, nil))).To(Succeed())
		crp := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zero-status"}, Spec: v1alpha1.ClusterRetryPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "zero-status"}},
			RetryPolicySpec:   v1alpha1.RetryPolicySpec{MaxAmplification: 3},
		}}
		Expect(k8sClient.Create(ctx, crp)).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "empty")).Should(HaveField("WithinWhy", v1alpha1.ReasonNothingSelected))
		Eventually(func() string {
			var p v1alpha1.ClusterRetryPolicy
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crp), &p)).To(Succeed())
			if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionWithinCap); c != nil {
				return c.Reason
			}
			return ""
		}).Should(Equal(v1alpha1.ReasonNothingSelected))

		for _, s := range []map[string]any{
			storedStatus(ctx, v1alpha1.GroupVersion.WithKind("RetryPolicy"), client.ObjectKey{Namespace: ns, Name: "empty"}),
			storedStatus(ctx, v1alpha1.GroupVersion.WithKind("ClusterRetryPolicy"), client.ObjectKey{Name: "zero-status"}),
		} {
			Expect(s).To(HaveKeyWithValue("services", int64(0)))
			Expect(s).To(HaveKeyWithValue("edges", int64(0)))
			Expect(s).To(HaveKeyWithValue("amplification", int64(0)))
		}
		out, errOut, err := cp.RunKubectl(ctx, "", "get", "rp", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(rowAge.ReplaceAllString(out, "<age>")).To(Equal(
			"NAME    CAP   AMPLIFICATION   WORST PATH   WORST TIME   MODE     WITHIN CAP   AGE\n" +
				"empty   3     0                                         Reject   Unknown      <age>\n"))
	})

	// kubectl get -o wide adds what the default columns leave out: why WITHIN CAP is what it is
	// (Unknown is NothingSelected, NoUpstreamsDeclared or InvalidSelector), the time cap and its
	// verdict (WITHIN CAP True says nothing of a chain over maxTimeToAnswer), and the graph's
	// size. Before, -o wide printed the default columns only.
	It("kubectl get -o wide shows the reason, the time cap and verdict, and the graph's size", func() {
		const ns = "wide-view"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", "order=3/2s", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "order", "", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 2)
		p := policy(ns, "slow", 2, nil)
		p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: time.Second}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(k8sClient.Create(ctx, policy(ns, "fast", 3, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "none"}}))).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "slow")).Should(HaveField("WithinWhy", v1alpha1.ReasonCapExceeded))
		Eventually(verdictOfPolicy(ctx, ns, "fast")).Should(HaveField("WithinWhy", v1alpha1.ReasonNothingSelected))
		Eventually(func() ([][]string, error) {
			out, errOut, err := cp.RunKubectl(ctx, "", "get", "rp", "-n", ns, "-o", "wide")
			if err != nil {
				return nil, fmt.Errorf("%w: %s", err, errOut)
			}
			return table(out), nil
		}).Should(Equal([][]string{
			{"NAME", "CAP", "AMPLIFICATION", "WORST PATH", "WORST TIME", "MODE", "WITHIN CAP", "AGE", "REASON", "MAX TIME", "WITHIN MAX TIME", "SERVICES", "EDGES"},
			{"fast", "3", "0", "", "", "Reject", "Unknown", "<age>", "NothingSelected", "", "", "0", "0"},
			{"slow", "2", "3", "gateway>order", "6.3s", "Reject", "False", "<age>", "CapExceeded", "1s", "False", "2", "1"},
		}))
	})

	// Two policies selecting one workload: the injector renders the strictest's settings; the
	// others' Ready says which workloads run another policy's, and follows that policy's
	// deletion and the namespace label that moves a ClusterRetryPolicy's scope. Before, every
	// policy said only "analysed 1 selected workload(s) ...".
	It("says in Ready which selected workloads run a stricter policy's proxy settings", func() {
		const ns = "overlap"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "overlap"}}})).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", "order=2", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 1)
		Expect(k8sClient.Create(ctx, policy(ns, "strict", 2, nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, policy(ns, "loose", 9, nil))).To(Succeed())
		crp := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "overlap-ceiling"}, Spec: v1alpha1.ClusterRetryPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "overlap"}},
			RetryPolicySpec:   v1alpha1.RetryPolicySpec{MaxAmplification: 5},
		}}
		Expect(k8sClient.Create(ctx, crp)).To(Succeed())
		ready := func(key client.ObjectKey, obj client.Object) func() (string, error) {
			return func() (string, error) {
				if err := k8sClient.Get(ctx, key, obj); err != nil {
					return "", err
				}
				var conds []metav1.Condition
				switch p := obj.(type) {
				case *v1alpha1.RetryPolicy:
					conds = p.Status.Conditions
				case *v1alpha1.ClusterRetryPolicy:
					conds = p.Status.Conditions
				}
				if c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady); c != nil {
					return c.Message, nil
				}
				return "", nil
			}
		}
		const (
			analysed = "analysed 1 selected workload(s): 2 service(s), 1 edge(s)"
			warning  = "; warning: 1 selected workload(s) are also selected by a stricter policy, whose spec.retry, spec.budget, spec.circuitBreaker and spec.observability their injected proxies run instead of this policy's (every selecting policy's cap is still enforced): "
		)
		strict, loose := client.ObjectKey{Namespace: ns, Name: "strict"}, client.ObjectKey{Namespace: ns, Name: "loose"}
		Eventually(ready(strict, &v1alpha1.RetryPolicy{})).Should(Equal(analysed))
		Eventually(ready(loose, &v1alpha1.RetryPolicy{})).Should(Equal(analysed + warning + "Deployment overlap/gateway (RetryPolicy overlap/strict)"))
		Eventually(ready(client.ObjectKeyFromObject(crp), &v1alpha1.ClusterRetryPolicy{})).Should(Equal(analysed + warning + "Deployment overlap/gateway (RetryPolicy overlap/strict)"))

		// The strictest gone: the cluster policy's settings run, and it says nothing.
		Expect(k8sClient.Delete(ctx, policy(ns, "strict", 2, nil))).To(Succeed())
		Eventually(ready(loose, &v1alpha1.RetryPolicy{})).Should(Equal(analysed + warning + "Deployment overlap/gateway (ClusterRetryPolicy overlap-ceiling)"))
		Eventually(ready(client.ObjectKeyFromObject(crp), &v1alpha1.ClusterRetryPolicy{})).Should(Equal(analysed))

		// The namespace out of the cluster policy's scope: the RetryPolicy's own settings run.
		var n corev1.Namespace
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		n.Labels["team"] = "elsewhere"
		Expect(k8sClient.Update(ctx, &n)).To(Succeed())
		Eventually(ready(loose, &v1alpha1.RetryPolicy{})).Should(Equal(analysed))
	})

	// A ClusterRetryPolicy's reconciles of an unchanged graph write nothing: no status patch,
	// no lastTransitionTime moved. Each trigger (a label of a selected namespace that its
	// selector does not read) waits for its reconcile before the next.
	It("writes no ClusterRetryPolicy status over 10 reconciles of an unchanged graph", func() {
		const ns = "crp-quiet"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "crp-quiet"}}})).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", "order=2", nil))).To(Succeed())
		crp := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "crp-quiet"}, Spec: v1alpha1.ClusterRetryPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "crp-quiet"}},
			RetryPolicySpec:   v1alpha1.RetryPolicySpec{MaxAmplification: 3},
		}}
		Expect(k8sClient.Create(ctx, crp)).To(Succeed())
		var settled v1alpha1.ClusterRetryPolicy
		Eventually(func() int64 {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crp), &settled)).To(Succeed())
			return settled.Status.Amplification
		}).Should(Equal(int64(2)))
		for i := range 10 {
			before, err := reconcileTotal(ClusterControllerName)
			Expect(err).NotTo(HaveOccurred())
			var n corev1.Namespace
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
			n.Labels["touch"] = strconv.Itoa(i)
			Expect(k8sClient.Update(ctx, &n)).To(Succeed())
			Eventually(func() (int, error) { return reconcileTotal(ClusterControllerName) }).Should(BeNumerically(">", before), "reconcile %d", i)
		}
		var after v1alpha1.ClusterRetryPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crp), &after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(settled.ResourceVersion), "status patches over 10 reconciles of an unchanged graph")
		Expect(after.Status.Conditions).To(Equal(settled.Status.Conditions))
	})
})
