package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// Inputs whose status would be larger than the API accepts: the write must still happen,
// bounded, and say so.
var _ = Describe("adversarial status", Ordered, func() {
	ctx := context.Background()

	It("writes a WithinCap message that would pass 32 KiB (a 40 KB malformed annotation) clipped, with its event clipped to 1 KiB", func() {
		const ns = "adv-long"
		createNamespace(ctx, ns)
		shop := map[string]string{"app.kubernetes.io/part-of": "shop"}
		// One malformed token of 40,000 characters: the error quotes it.
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", strings.Repeat("a", 40000)+"=3", shop))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 1)
		Expect(k8sClient.Create(ctx, policy(ns, "checkout", 4, &metav1.LabelSelector{MatchLabels: shop}))).To(Succeed())

		var st v1alpha1.RetryPolicyStatus
		Eventually(func(g Gomega) {
			var err error
			st, err = statusOf(ctx, ns, "checkout")()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWithinCap)).NotTo(BeNil())
		}).Should(Succeed())
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWithinCap)
		Expect(c.Reason).To(Equal(v1alpha1.ReasonInvalidAnnotation))
		Expect(len(c.Message)).To(BeNumerically("<=", 32768))
		Expect(c.Message).To(HavePrefix(`1 invalid annotation(s): Deployment adv-long/gateway: annotation retrycap.dev/upstreams: token "aaaa`))
		Expect(c.Message).To(HaveSuffix(`aaaa... (truncated from 40207 bytes)`))

		Eventually(eventsAbout(ctx, ns, "checkout")).Should(HaveLen(1))
		evs, err := eventsAbout(ctx, ns, "checkout")()
		Expect(err).NotTo(HaveOccurred())
		Expect(evs[0].Reason).To(Equal(v1alpha1.ReasonInvalidAnnotation))
		Expect(len(evs[0].Note)).To(BeNumerically("<=", 1024))
		Expect(evs[0].Note).To(HaveSuffix(`aaaa... (truncated from 32768 bytes)`))
	})

	It("counts 10,000 violations through the API server (20 listed), and keeps the status updating", func() {
		const ns = "adv-fanout"
		createNamespace(ctx, ns)
		shop := map[string]string{"app.kubernetes.io/part-of": "shop"}
		// One gateway fanning out to 10,000 upstreams, 2 tries each, under cap 1: 10,000
		// over-cap paths from one Deployment (an annotation of 80 KB).
		ups := make([]string, 10000)
		for i := range ups {
			ups[i] = fmt.Sprintf("u%04d=2", i)
		}
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", strings.Join(ups, ","), shop))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 1)
		Expect(k8sClient.Create(ctx, policy(ns, "checkout", 1, &metav1.LabelSelector{MatchLabels: shop}))).To(Succeed())

		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(HaveField("WithinMessage",
			"client -x1-> gateway -x2-> u0000 = 2 > cap 1 (and 9999 more; status.violations lists the worst 20 of 10000)"))
		st, err := statusOf(ctx, ns, "checkout")()
		Expect(err).NotTo(HaveOccurred())
		Expect([]int{int(st.Services), int(st.Edges), len(st.Violations), len(st.Chains)}).To(Equal([]int{10001, 10000, 20, 1}))
		Expect(st.Violations[19].Path).To(Equal([]string{"gateway", "u0019"}))
		b, err := json.Marshal(st)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(b)).To(BeNumerically("<", 64<<10), "status bytes")

		// The large status does not stop the next write: the first upstream's tries raised.
		ups[0] = "u0000=3"
		setUpstreams(ctx, ns, "gateway", strings.Join(ups, ","))
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(HaveField("WithinMessage",
			"client -x1-> gateway -x3-> u0000 = 3 > cap 1 (and 9999 more; status.violations lists the worst 20 of 10000)"))

		// 9,999 violations tie at 2: the 19 listed after the worst are the same whatever the
		// graph's history (patched or built anew), so a change the status does not show writes
		// nothing. Counting starts once the counts have held still.
		key := types.NamespacedName{Namespace: ns, Name: "checkout"}
		Eventually(func(g Gomega) {
			settled := counted.Counts(key)
			g.Consistently(func() Counts { return counted.Counts(key) }, "1s").Should(Equal(settled))
		}, "60s").Should(Succeed())
		start := counted.Counts(key)
		for _, v := range []string{"1", "2"} {
			prev := counted.Counts(key).Reconciles
			updateDeployment(ctx, ns, "gateway", func(d *appsv1.Deployment) { d.Spec.Template.Labels["build"] = v })
			Eventually(func() int { return counted.Counts(key).Reconciles }).Should(BeNumerically(">", prev))
		}
		Consistently(func() int { return counted.Counts(key).StatusWrites }, "500ms").Should(Equal(start.StatusWrites))
	})

	It("says why a self-loop's load is unbounded, and follows it into a retry cycle and back", func() {
		const ns = "adv-selfloop"
		createNamespace(ctx, ns)
		shop := map[string]string{"app.kubernetes.io/part-of": "shop"}
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", "gateway=1", shop))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 1)
		Expect(k8sClient.Create(ctx, policy(ns, "checkout", 4, &metav1.LabelSelector{MatchLabels: shop}))).To(Succeed())

		within := verdict{Amplification: 1, WorstPath: "gateway", Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "True", WithinWhy: v1alpha1.ReasonWithinCap,
			WithinMessage: "amplification 1 <= cap 4 (worst path gateway); worst-case load unbounded: gateway calls itself: a request can go round without end"}
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(Equal(within))
		st, err := statusOf(ctx, ns, "checkout")()
		Expect(err).NotTo(HaveOccurred())
		Expect(*st.WorstCaseLoad).To(Equal(v1alpha1.ServiceLoad{Service: "gateway", Requests: 9223372036854775807}))

		setUpstreams(ctx, ns, "gateway", "gateway=2")
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(Equal(verdict{Amplification: 9223372036854775807, WorstPath: "gateway>gateway",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled, Within: "False", WithinWhy: v1alpha1.ReasonRetryCycle,
			WithinMessage: "retry cycle gateway -x2-> gateway: amplification unbounded > cap 4"}))
		setUpstreams(ctx, ns, "gateway", "gateway=1")
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(Equal(within))
	})

	It("writes the largest status a ClusterRetryPolicy can have (127-character nodes, every list full) within etcd's 1.5 MiB", func() {
		// 60 entrypoints into a chain of 300 services, names of 63 characters in a namespace of
		// 63 (nodes "name.ns" of 127), 2 tries a hop under cap 1 and maxTimeToAnswer 1ms: 50
		// chains, 20 violations and 20 time violations, each path elided to 64 nodes, each
		// message at its 4 KiB clip, two conditions at 32 KiB.
		ns := strings.Repeat("n", 58) + "00000"
		Expect(k8sClient.Create(ctx, labelledNamespace(ns, map[string]string{"chain": "largest"}))).To(Succeed())
		name := func(i int) string { return fmt.Sprintf("s%s%05d", strings.Repeat("x", 57), i) }
		const depth, entries = 300, 60
		for i := range depth {
			up := ""
			if i < depth-1 {
				up = name(i+1) + "." + ns + "=2"
			}
			Expect(k8sClient.Create(ctx, deployment(ns, name(i), up, nil))).To(Succeed())
		}
		for i := range entries {
			Expect(k8sClient.Create(ctx, deployment(ns, fmt.Sprintf("e%s%05d", strings.Repeat("y", 57), i), name(0)+"."+ns+"=2", nil))).To(Succeed())
		}
		waitForCachedWorkloads(ctx, ns, depth+entries)
		p := clusterPolicy("largest", 1, map[string]string{"chain": "largest"})
		p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: time.Millisecond}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		Eventually(func(g Gomega) {
			st, err := clusterStatusOf(ctx, "largest")()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(verdictOf(st).WithinWhy).To(Equal(v1alpha1.ReasonCapExceeded))
			g.Expect([]int{int(st.Services), len(st.Chains), len(st.Violations), len(st.TimeViolations), len(st.TimeoutInversions)}).To(Equal([]int{depth + entries, 50, 20, 20, 20}))
		}).Should(Succeed())
		var got v1alpha1.ClusterRetryPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "largest"}, &got)).To(Succeed())
		whole, err := json.Marshal(&got)
		Expect(err).NotTo(HaveOccurred())
		st, err := json.Marshal(&got.Status)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("largest ClusterRetryPolicy: %d bytes, its status %d\n", len(whole), len(st))
		Expect(len(whole)).To(BeNumerically("<", 1536*1024-64*1024), "object bytes, with 64 KiB to spare under etcd's 1.5 MiB")
		Expect(meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionWithinMaxTime).Reason).To(Equal(v1alpha1.ReasonMaxTimeExceeded))
	})
})
