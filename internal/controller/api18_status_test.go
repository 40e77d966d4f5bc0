package controller

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

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
