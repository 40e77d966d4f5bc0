package controller

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/kubeobj"
	"github.com/retrycap/retrycap/internal/labapp"
	"github.com/retrycap/retrycap/internal/promquery"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/scheme"
)

// observedCondition is ObservedWithinComputed without its timestamp, nil when absent.
func observedCondition(st v1alpha1.RetryPolicyStatus) *metav1.Condition {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionObservedWithinComputed)
	if c == nil {
		return nil
	}
	out := *c
	out.LastTransitionTime = metav1.Time{}
	return &out
}

// promInstant evaluates q in the Prometheus at url now, as a string ("{} => 2 @[...]").
func promInstant(ctx context.Context, url, q string) func() (string, error) {
	return func() (string, error) {
		pc, err := api.NewClient(api.Config{Address: url})
		if err != nil {
			return "", err
		}
		v, _, _, err := promv1.NewAPI(pc).Query(ctx, q, time.Now())
		if err != nil {
			return "", err
		}
		return v.String(), nil
	}
}

// startObservedManager runs a manager of its own with an Observer of q polling every 200 ms,
// caching the namespaces given (and the cluster-scoped objects), with the reconciler setup
// adds; it stops at the spec's cleanup.
func startObservedManager(ctx context.Context, q *promquery.Client, namespaces []string, setup func(ctrl.Manager, *Observer) error) {
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme: scheme.New(),
		Cache: func() cache.Options {
			o := kubeobj.CacheOptions()
			o.DefaultNamespaces = map[string]cache.Config{}
			for _, ns := range namespaces {
				o.DefaultNamespaces[ns] = cache.Config{}
			}
			return o
		}(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	obs := &Observer{Query: q, Interval: 200 * time.Millisecond}
	Expect(mgr.Add(obs)).To(Succeed())
	Expect(setup(mgr, obs)).To(Succeed())
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	DeferCleanup(func() { stop(); <-done })
}

var _ = Describe("Observed amplification (--prometheus-url)", func() {
	ctx := context.Background()

	It("puts the observed tries of real proxies, scraped by a real Prometheus, beside the computed ones", func() {
		const ns = "observed-shop"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", "order=1", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "order", "payment=2", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "payment", "", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 3)
		Expect(k8sClient.Create(ctx, policy(ns, "checkout", 10, nil))).To(Succeed())

		// The suite's reconciler has no Observer: neither the field nor the condition.
		Eventually(func() (int64, error) {
			st, err := statusOf(ctx, ns, "checkout")()
			return st.Amplification, err
		}).Should(Equal(int64(2)))
		st, err := statusOf(ctx, ns, "checkout")()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.ObservedAmplification).To(BeNil())
		Expect(observedCondition(st)).To(BeNil())

		// The lab's chain, payment always failing: order's proxy makes 3 attempts per call
		// (configured by hand: the annotation says 2), gateway's 1.
		bin, err := labapp.BuildProxy(cp.RepoRoot, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		chain := promtest.StartChain(GinkgoT(), promtest.ChainConfig{ProxyBin: bin, OrderAttempts: 3})
		// Before Prometheus starts, so that every counter exists at its first scrape (see
		// internal/promquery's test).
		chain.Send(GinkgoT(), 1)
		prom := promtest.StartTargets(GinkgoT(), cp.RepoRoot, chain.Targets())
		q, err := promquery.New(promquery.Options{URL: prom.URL, Window: 10 * time.Minute})
		Expect(err).NotTo(HaveOccurred())
		// The burst after the first scrape of both proxies: its samples are the window's start.
		Eventually(promInstant(ctx, prom.URL, `count(retrycap_proxy_requests_total)`)).Should(MatchRegexp(`^\{\} => 2 @`))
		chain.Send(GinkgoT(), 20)
		// The counters final, the proxies stopped: the ratios across targets are exact.
		promtest.Settle(GinkgoT(), prom, chain)

		// A manager of its own with an Observer, watching this namespace only (the suite's
		// reconciler keeps running: it leaves the observed side as it finds it).
		startObservedManager(ctx, q, []string{ns}, func(mgr ctrl.Manager, obs *Observer) error {
			return (&RetryPolicyReconciler{Observed: obs, Index: fedIndex(mgr)}).SetupWithManager(mgr)
		})

		edges := func(computed int64) []v1alpha1.ObservedEdge {
			return []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "3.00", CallsPerRequest: "1.00", Computed: computed, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", CallsPerRequest: "not measured", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
			}
		}
		observedOf := func() (*v1alpha1.ObservedAmplification, *metav1.Condition, error) {
			st, err := statusOf(ctx, ns, "checkout")()
			return st.ObservedAmplification, observedCondition(st), err
		}
		undeclared := &metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 1,
			Message: "edge order>payment: 3.00 tries per call observed over 10m0s (retrycap-proxy), the graph computes 2: a retry layer the graph does not know (application code, a mesh it does not read, or a proxy configured by hand)"}
		Eventually(func(g Gomega) {
			o, c, err := observedOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(Equal(undeclared))
			g.Expect(o).To(Equal(&v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "10m0s", Edges: edges(2)}))
		}).Should(Succeed())

		// The annotation now says what the proxy does: within.
		setUpstreams(ctx, ns, "order", "payment=3")
		Eventually(func(g Gomega) {
			o, c, err := observedOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(Equal(&metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionTrue, Reason: "WithinComputed", ObservedGeneration: 1,
				Message: "2 edges observed over 10m0s, none with more tries per call or calls per request than computed; observed amplification 3.00 along gateway>order>payment; calls per inbound request not measured at gateway (no counted layer sent them a request)"}))
			g.Expect(o).To(Equal(&v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "10m0s", Edges: edges(3)}))
		}).Should(Succeed())

		// Prometheus down: Unknown with the URL and the error; the last figures stay.
		prom.Stop()
		host := prom.URL[len("http://"):]
		Eventually(func(g Gomega) {
			o, c, err := observedOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(Equal(&metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionUnknown, Reason: "PrometheusUnavailable", ObservedGeneration: 1,
				Message: fmt.Sprintf("querying Prometheus at %s: query %s: dial tcp %s: connect: connection refused", prom.URL, promquery.Queries(10*time.Minute, "service")[0], host)}))
			g.Expect(o).To(Equal(&v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "10m0s", Edges: edges(3)}))
		}).Should(Succeed())
	})
	It("puts the observed figures of a chain across two namespaces into a ClusterRetryPolicy's status, nodes named name.ns", func() {
		const front, shop = "observed-front", "observed-orders"
		sel := map[string]string{chainLabel: "observed"}
		Expect(k8sClient.Create(ctx, labelledNamespace(front, sel))).To(Succeed())
		Expect(k8sClient.Create(ctx, labelledNamespace(shop, sel))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(front, "gateway", "order."+shop+"=1", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(shop, "order", "payment=1", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(shop, "payment", "", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, front, 1)
		waitForCachedWorkloads(ctx, shop, 2)
		Expect(k8sClient.Create(ctx, clusterPolicy("observed-checkout", 10, sel))).To(Succeed())
		DeferCleanup(func() {
			Expect(k8sClient.Delete(ctx, &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "observed-checkout"}})).To(Succeed())
		})
		Eventually(func() (int64, error) {
			st, err := clusterStatusOf(ctx, "observed-checkout")()
			return st.Amplification, err
		}).Should(Equal(int64(1)))

		// gateway in one namespace calls order of the other by "order.<ns>"; order's
		// application calls payment (of its own namespace) 3 times per request itself, through
		// a proxy that makes 1 attempt per call. The scrape adds each proxy's namespace.
		bin, err := labapp.BuildProxy(cp.RepoRoot, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		chain := promtest.StartChain(GinkgoT(), promtest.ChainConfig{ProxyBin: bin, OrderAttempts: 1, OrderAppTries: 3, Order: "order." + shop,
			GatewayLabels: map[string]string{"namespace": front}, OrderLabels: map[string]string{"namespace": shop}})
		chain.Send(GinkgoT(), 1)
		prom := promtest.StartTargets(GinkgoT(), cp.RepoRoot, chain.Targets())
		q, err := promquery.New(promquery.Options{URL: prom.URL, Window: 10 * time.Minute})
		Expect(err).NotTo(HaveOccurred())
		Eventually(promInstant(ctx, prom.URL, `count(retrycap_proxy_requests_total)`)).Should(MatchRegexp(`^\{\} => 2 @`))
		chain.Send(GinkgoT(), 20)
		promtest.Settle(GinkgoT(), prom, chain)

		startObservedManager(ctx, q, []string{front, shop}, func(mgr ctrl.Manager, obs *Observer) error {
			return (&ClusterRetryPolicyReconciler{Observed: obs, Index: fedIndex(mgr)}).SetupWithManager(mgr)
		})
		observedOf := func() (*v1alpha1.ObservedAmplification, *metav1.Condition, error) {
			st, err := clusterStatusOf(ctx, "observed-checkout")()
			return st.ObservedAmplification, observedCondition(st), err
		}
		edges := func(computedCalls int64) []v1alpha1.ObservedEdge {
			return []v1alpha1.ObservedEdge{
				{From: "order." + shop, To: "payment." + shop, Tries: "1.00", CallsPerRequest: "3.00", Computed: 1, ComputedCalls: computedCalls, Source: "retrycap-proxy"},
				{From: "gateway." + front, To: "order." + shop, Tries: "1.00", CallsPerRequest: "not measured", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
			}
		}
		path := "gateway." + front + ">order." + shop + ">payment." + shop
		Eventually(func(g Gomega) {
			o, c, err := observedOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(Equal(&metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 1,
				Message: "edge order." + shop + ">payment." + shop + ": 3.00 calls per inbound request at order." + shop + " observed over 10m0s (retrycap-proxy), the graph declares 1: the application retries by itself behind its proxy (app retries?), or fans out more calls per request than its annotation declares"}))
			g.Expect(o).To(Equal(&v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: path, Window: "10m0s", Edges: edges(1)}))
		}).Should(Succeed())

		// The annotation declares the application's three calls: within.
		setUpstreams(ctx, shop, "order", "payment=1*3")
		Eventually(func(g Gomega) {
			o, c, err := observedOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(Equal(&metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionTrue, Reason: "WithinComputed", ObservedGeneration: 1,
				Message: "2 edges observed over 10m0s, none with more tries per call or calls per request than computed; observed amplification 3.00 along " + path + "; calls per inbound request not measured at gateway." + front + " (no counted layer sent them a request)"}))
			g.Expect(o).To(Equal(&v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: path, Window: "10m0s", Edges: edges(3)}))
		}).Should(Succeed())
	})
})
