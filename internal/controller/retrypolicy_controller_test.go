package controller

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/status"
)

const sourceController = EventSource

var _ = Describe("RetryPolicy status", func() {
	ctx := context.Background()

	It("reports 18 > cap 3 for the incident18 sample, in full", func() {
		createSample(ctx, "incident18.yaml", "shop")
		Eventually(statusOf(ctx, "shop", "checkout")).Should(WithTransform(func(st v1alpha1.RetryPolicyStatus) v1alpha1.RetryPolicyStatus {
			st.Conditions = nil
			return st
		}, Equal(v1alpha1.RetryPolicyStatus{
			ObservedGeneration: 1, Services: 3, Edges: 2, Amplification: 18, Bounded: ptr.To(true),
			WorstPath:     "gateway>catalog>db",
			WorstCaseLoad: &v1alpha1.ServiceLoad{Service: "db", Requests: 18},
			Chains:        []v1alpha1.Chain{{Entrypoint: "gateway", Amplification: 18, Path: []string{"gateway", "catalog", "db"}}},
			Violations: []v1alpha1.Violation{{
				Path: []string{"gateway", "catalog", "db"}, Amplification: 18,
				Message:    "client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3",
				Suggestion: "gateway: catalog=1; catalog: db=1",
			}},
			// Time along the chain (issue 29): the sample's 2s per-try timeout and 100ms..2s
			// backoff on both hops: 2 x (3 x min(2s, 6.3s) + 300ms).
			WorstTimeToAnswer: "12.6s", WorstTimePath: "gateway>catalog>db",
			TimeoutInversions: []v1alpha1.TimeoutInversion{{
				Caller: "gateway", Callee: "catalog", Layer: "Deployment shop/gateway", PerTryTimeout: "2s", InnerTime: "6.3s",
				Message: "gateway -> catalog: Deployment shop/gateway per-try timeout 2s < catalog's worst time 6.3s: gateway retries while catalog still works on the abandoned try",
				Fix:     "Deployment shop/gateway per-try timeout for catalog >= 6.3s, or a timeout of at most 2s on catalog's own calls",
			}},
			TimeoutInversionsTotal: 1,
		})))
		st, err := statusOf(ctx, "shop", "checkout")()
		Expect(err).NotTo(HaveOccurred())
		Expect(verdictOf(st)).To(Equal(verdict{
			Amplification: 18, WorstPath: "gateway>catalog>db",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3",
		}))
		for _, c := range st.Conditions {
			Expect(c.ObservedGeneration).To(Equal(int64(1)), "observedGeneration of condition %s", c.Type)
		}
		Expect(meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady).Message).To(Equal("analysed 3 selected workload(s): 3 service(s), 2 edge(s)"))
		Eventually(func() (float64, error) { return gauge("retrycap_policy_amplification", "shop", "checkout") }).Should(Equal(18.0))
		Expect(gauge("retrycap_policy_within_cap", "shop", "checkout")).To(Equal(0.0))
		Eventually(scrapeMetrics).Should(And(
			ContainSubstring("\n"+`retrycap_policy_amplification{namespace="shop",policy="checkout"} 18`+"\n"),
			ContainSubstring("\n"+`retrycap_policy_within_cap{namespace="shop",policy="checkout"} 0`+"\n"),
		))
		Eventually(eventsAbout(ctx, "shop", "checkout")).Should(Equal([]recordedEvent{
			{"Warning", v1alpha1.ReasonCapExceeded, "Analyze", "client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3", sourceController},
		}))
	})

	It("reports 27 > cap 4 for the storm27 sample", func() {
		createSample(ctx, "storm27.yaml", "payments")
		Eventually(verdictOfPolicy(ctx, "payments", "storm")).Should(Equal(verdict{
			Amplification: 27, WorstPath: "frontend>checkout>billing>payment",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x1-> frontend -x3-> checkout -x3-> billing -x3-> payment = 27 > cap 4",
		}))
		st, _ := statusOf(ctx, "payments", "storm")()
		Expect(st.Violations).To(Equal([]v1alpha1.Violation{{
			Path: []string{"frontend", "checkout", "billing", "payment"}, Amplification: 27,
			Message:    "client -x1-> frontend -x3-> checkout -x3-> billing -x3-> payment = 27 > cap 4",
			Suggestion: "checkout: billing=1; billing: payment=1",
		}}))
		Expect(st.WorstCaseLoad).To(Equal(&v1alpha1.ServiceLoad{Service: "payment", Requests: 27}))
	})

	It("follows a Deployment whose attempts are lowered, and records the WithinCap transition", func() {
		ns := "lower"
		createSample(ctx, "incident18.yaml", ns)
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(HaveField("Amplification", int64(18)))

		setUpstreams(ctx, ns, "catalog", "db=1")
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(Equal(verdict{
			Amplification: 6, WorstPath: "gateway>catalog>db",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x2-> gateway -x3-> catalog -x1-> db = 6 > cap 3",
		}))

		setUpstreams(ctx, ns, "gateway", "catalog=1")
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(Equal(verdict{
			Amplification: 2, WorstPath: "gateway>catalog>db",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "True", WithinWhy: v1alpha1.ReasonWithinCap,
			WithinMessage: "amplification 2 <= cap 3 (worst path gateway>catalog>db)",
		}))
		st, _ := statusOf(ctx, ns, "checkout")()
		Expect(st.Violations).To(BeEmpty())

		// 18 -> 6 keeps the verdict (no event); 6 -> 2 crosses the cap (one event).
		Eventually(eventsAbout(ctx, ns, "checkout")).Should(Equal([]recordedEvent{
			{"Warning", v1alpha1.ReasonCapExceeded, "Analyze", "client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3", sourceController},
			{"Normal", v1alpha1.ReasonWithinCap, "Analyze", "amplification 2 <= cap 3 (worst path gateway>catalog>db)", sourceController},
		}))
		Eventually(func() (float64, error) { return gauge("retrycap_policy_within_cap", ns, "checkout") }).Should(Equal(1.0))
		Expect(gauge("retrycap_policy_amplification", ns, "checkout")).To(Equal(2.0))
	})

	It("reports a cycle as no call loop: the worst chain that visits each service once", func() {
		// gateway calls catalog for one endpoint, catalog calls gateway for another: no request
		// goes round (DESIGN.md, "Real inputs, third round"), so the chain is gateway>catalog,
		// 2 x 2 = 4 > cap 3, not unbounded.
		ns := "cycle"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", "catalog=2", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "catalog", "gateway=1", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 2)
		Expect(k8sClient.Create(ctx, policy(ns, "loop", 3, nil, v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2}))).To(Succeed())

		Eventually(verdictOfPolicy(ctx, ns, "loop")).Should(Equal(verdict{
			Amplification: 4, WorstPath: "gateway>catalog",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x2-> gateway -x2-> catalog = 4 > cap 3",
		}))
		st, _ := statusOf(ctx, ns, "loop")()
		Expect(st.Bounded).To(Equal(ptr.To(true)))
		Expect(st.Violations).To(Equal([]v1alpha1.Violation{{
			Path: []string{"gateway", "catalog"}, Amplification: 4,
			Message:    "client -x2-> gateway -x2-> catalog = 4 > cap 3",
			Suggestion: "gateway: catalog=1",
		}}))
		Eventually(func() (float64, error) { return gauge("retrycap_policy_amplification", ns, "loop") }).Should(Equal(4.0))
	})

	It("gives each violation its own fix when one entrypoint's client attempts alone exceed the cap", func() {
		// api's clients make 5 attempts against cap 4: no rewrite fits its chain, whose fix
		// names what the plan (analyze -o patch) lowers on it, then why that is not enough
		// (before: the reason alone). web's chain is fixed by lowering order's db (before that:
		// it read "no rewrite fits: client attempts 5 at entrypoint api exceed cap 4" too). The
		// CLI's golden fixtext-mixed says the same.
		ns := "fixtext"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, deployment(ns, "web", "order=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "api", "order=2", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "order", "db=2", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 3)
		Expect(k8sClient.Create(ctx, policy(ns, "mixed", 4, nil,
			v1alpha1.Entrypoint{Service: "web", ClientAttempts: 1}, v1alpha1.Entrypoint{Service: "api", ClientAttempts: 5}))).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "mixed")).Should(HaveField("Amplification", int64(20)))
		st, _ := statusOf(ctx, ns, "mixed")()
		Expect(st.Violations).To(Equal([]v1alpha1.Violation{{
			Path: []string{"api", "order", "db"}, Amplification: 20,
			Message:    "client -x5-> api -x2-> order -x2-> db = 20 > cap 4",
			Suggestion: "api: order=1; order: db=1; no rewrite fits: client attempts 5 at entrypoint api exceed cap 4",
		}, {
			Path: []string{"web", "order", "db"}, Amplification: 6,
			Message:    "client -x1-> web -x3-> order -x2-> db = 6 > cap 4",
			Suggestion: "order: db=1",
		}}))
	})

	It("reports a malformed annotation as InvalidAnnotation naming the workload, with the valid part", func() {
		ns := "malformed"
		createSample(ctx, "incident18.yaml", ns)
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(HaveField("Amplification", int64(18)))
		setUpstreams(ctx, ns, "catalog", "db==3")
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(Equal(verdict{
			Amplification: 6, WorstPath: "gateway>catalog",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonInvalidAnnotation,
			WithinMessage: `1 invalid annotation(s): Deployment malformed/catalog: annotation retrycap.dev/upstreams: token "db==3" at column 1: attempts must be an integer 1..100; the valid part: client -x2-> gateway -x3-> catalog = 6 > cap 3`,
		}))
		// CapExceeded -> InvalidAnnotation changes the reason: an event.
		Eventually(eventsAbout(ctx, ns, "checkout")).Should(HaveLen(2))
		evs, _ := eventsAbout(ctx, ns, "checkout")()
		Expect(evs[1].Type).To(Equal("Warning"))
		Expect(evs[1].Reason).To(Equal(v1alpha1.ReasonInvalidAnnotation))
	})

	It("reports an invalid selector as Ready False naming the field and value", func() {
		ns := "badselector"
		createNamespace(ctx, ns)
		sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
		Expect(k8sClient.Create(ctx, policy(ns, "p", 3, sel))).To(Succeed())
		Eventually(statusOf(ctx, ns, "p")).Should(WithTransform(func(st v1alpha1.RetryPolicyStatus) []metav1.Condition {
			for i := range st.Conditions {
				st.Conditions[i].LastTransitionTime = metav1.Time{}
			}
			return st.Conditions
		}, Equal([]metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: 1, Reason: status.ReasonInvalidSelector,
				Message: `spec.selector {"matchExpressions":[{"key":"team","operator":"Near"}]} is invalid: "Near" is not a valid label selector operator`},
			{Type: v1alpha1.ConditionWithinCap, Status: metav1.ConditionUnknown, ObservedGeneration: 1, Reason: status.ReasonInvalidSelector,
				Message: "no graph: spec.selector is invalid (see condition Ready)"},
		})))
	})

	It("keeps two policies with different selectors apart, and follows deletes", func() {
		ns := "teams"
		createNamespace(ctx, ns)
		a := map[string]string{"team": "a"}
		b := map[string]string{"team": "b"}
		Expect(k8sClient.Create(ctx, deployment(ns, "a-front", "a-back=3", a))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "a-back", "", a))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "b-front", "b-back=2", b))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "b-back", "", b))).To(Succeed())
		// A bare Pod is a workload; a Pod a controller owns is not (its workload covers it).
		bare := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-job", Labels: b, Annotations: map[string]string{annotations.Upstreams: "b-front=2"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
		}
		Expect(k8sClient.Create(ctx, bare)).To(Succeed())
		owned := bare.DeepCopy()
		owned.ResourceVersion, owned.Name = "", "a-front-7d9f-x2x"
		owned.Labels, owned.Annotations = a, map[string]string{annotations.Upstreams: "a-front=100"}
		owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "a-front-7d9f", UID: "0c0ffee0-0000-4000-8000-000000000001", Controller: ptr.To(true)}}
		Expect(k8sClient.Create(ctx, owned)).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 5)

		Expect(k8sClient.Create(ctx, policy(ns, "team-a", 2, &metav1.LabelSelector{MatchLabels: a}))).To(Succeed())
		Expect(k8sClient.Create(ctx, policy(ns, "team-b", 5, &metav1.LabelSelector{MatchLabels: b}))).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "team-a")).Should(Equal(verdict{
			Amplification: 3, WorstPath: "a-front>a-back",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x1-> a-front -x3-> a-back = 3 > cap 2",
		}))
		Eventually(verdictOfPolicy(ctx, ns, "team-b")).Should(Equal(verdict{
			Amplification: 4, WorstPath: "b-job>b-front>b-back",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "True", WithinWhy: v1alpha1.ReasonWithinCap,
			WithinMessage: "amplification 4 <= cap 5 (worst path b-job>b-front>b-back)",
		}))
		teamB := types.NamespacedName{Namespace: ns, Name: "team-b"}
		bWrites := counted.Counts(teamB).StatusWrites

		// Deleting a workload of team a changes team-a only; what is left declares no upstreams,
		// which the status says rather than a green WithinCap.
		Expect(k8sClient.Delete(ctx, deployment(ns, "a-front", "", nil))).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "team-a")).Should(Equal(verdict{
			Amplification: 1, WorstPath: "a-back",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "Unknown", WithinWhy: v1alpha1.ReasonNoUpstreamsDeclared,
			WithinMessage: "none of the 1 selected workload(s) declares retrycap.dev/upstreams: no edges, nothing to check",
		}))
		Expect(counted.Counts(teamB).StatusWrites).To(Equal(bWrites))

		// Deleting the bare Pod changes team-b.
		Expect(k8sClient.Delete(ctx, bare)).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "team-b")).Should(HaveField("WorstPath", "b-front>b-back"))
		Expect(verdictOfPolicy(ctx, ns, "team-b")()).To(HaveField("Amplification", int64(2)))

		// Deleting a policy deletes its metric series and leaves the other policy's.
		Eventually(func() (bool, error) { return hasSeries("retrycap_policy_amplification", ns, "team-a") }).Should(BeTrue())
		Expect(k8sClient.Delete(ctx, policy(ns, "team-a", 2, nil))).To(Succeed())
		Eventually(func() (bool, error) { return hasSeries("retrycap_policy_amplification", ns, "team-a") }).Should(BeFalse())
		Expect(hasSeries("retrycap_policy_within_cap", ns, "team-a")).To(BeFalse())
		Expect(scrapeMetrics()).NotTo(ContainSubstring(`policy="team-a"`))
		Expect(scrapeMetrics()).To(ContainSubstring(`retrycap_policy_amplification{namespace="teams",policy="team-b"} 2` + "\n"))
		Expect(gauge("retrycap_policy_amplification", ns, "team-b")).To(Equal(2.0))
		err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "team-a"}, &v1alpha1.RetryPolicy{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("writes the status only when it changed", func() {
		ns := "noop"
		createSample(ctx, "incident18.yaml", ns)
		key := types.NamespacedName{Namespace: ns, Name: "checkout"}
		Eventually(verdictOfPolicy(ctx, ns, "checkout")).Should(HaveField("Amplification", int64(18)))
		// At least one write; more when the informers delivered the sample's workloads to
		// separate reconciles (a loaded machine): each intermediate graph is a real status.
		Expect(counted.Counts(key).StatusWrites).To(BeNumerically(">=", 1))
		// The sample's creation may still have reconciles queued (its workloads delivered one by
		// one on a loaded machine): start counting once the counts have held still for a second.
		Eventually(func(g Gomega) {
			settled := counted.Counts(key)
			g.Consistently(func() Counts { return counted.Counts(key) }, "1s").Should(Equal(settled))
		}, "60s").Should(Succeed())
		var before v1alpha1.RetryPolicy
		Expect(k8sClient.Get(ctx, key, &before)).To(Succeed())
		start := counted.Counts(key)

		// Changes the graph does not read never reach the reconciler: image, replicas, the
		// Deployment's own labels, an unrelated template annotation.
		updateDeployment(ctx, ns, "gateway", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image = "retrycap/lab-app:v0.2.0"
			d.Spec.Replicas = ptr.To(int32(3))
			d.Labels["release"] = "canary"
			d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
		})
		Consistently(func() Counts { return counted.Counts(key) }, "1s").Should(Equal(start))

		// A template label the selector does not use is graph input: the policy is reconciled
		// and nothing is written. Once per change on a quiet machine; an extra reconcile for one
		// of the three changes was seen twice in CI rehearsals (5 for 3: two events of one change
		// that the queue did not merge because the first reconcile had started; not traced
		// further), so the count is bounded at two per change, the writes stay exact.
		for _, v := range []string{"1", "2", "3"} {
			prev := counted.Counts(key).Reconciles
			updateDeployment(ctx, ns, "catalog", func(d *appsv1.Deployment) { d.Spec.Template.Labels["build"] = v })
			Eventually(func() int { return counted.Counts(key).Reconciles }).Should(BeNumerically(">", prev))
		}
		Consistently(func() Counts { return counted.Counts(key) }, "500ms").Should(And(
			HaveField("StatusWrites", start.StatusWrites),
			HaveField("Reconciles", And(BeNumerically(">=", start.Reconciles+3), BeNumerically("<=", start.Reconciles+6)))))
		var after v1alpha1.RetryPolicy
		Expect(k8sClient.Get(ctx, key, &after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
	})

	It("recomputes when the policy's spec changes, with the new observedGeneration", func() {
		ns := "respec"
		createSample(ctx, "storm27.yaml", ns)
		Eventually(verdictOfPolicy(ctx, ns, "storm")).Should(HaveField("Amplification", int64(27)))
		var p v1alpha1.RetryPolicy
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "storm"}, &p)).To(Succeed())
		p.Spec.MaxAmplification = 27
		Expect(k8sClient.Update(ctx, &p)).To(Succeed())
		Eventually(statusOf(ctx, ns, "storm")).Should(And(
			HaveField("ObservedGeneration", int64(2)),
			WithTransform(verdictOf, HaveField("WithinWhy", v1alpha1.ReasonWithinCap)),
		))
		st, _ := statusOf(ctx, ns, "storm")()
		for _, c := range st.Conditions {
			Expect(c.ObservedGeneration).To(Equal(int64(2)), "condition %s", c.Type)
		}
	})
})
