package controller

import (
	"context"
	"fmt"
	"net/http"
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
	"github.com/retrycap/retrycap/internal/cluster"
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
		common := []string{"--chain-cap", "0", "--backoff-base", "1ms", "--backoff-max", "2ms",
			"--budget-percent", "100", "--budget-min-per-second", "10000", "--breaker-failures", "0"}
		startProxy := func(args ...string) *labapp.ProxyProc {
			p, err := labapp.StartProxy(bin, 10*time.Second, append(common, args...)...)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = p.Stop(5 * time.Second) })
			return p
		}
		startApp := func(cfg labapp.Config) *labapp.App {
			a, err := labapp.Start(cfg)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(a.Close)
			return a
		}
		payment := startApp(labapp.Config{Name: "payment"})
		payment.SetFailing(true)
		po := startProxy("--service", "order", "--upstreams", "payment=3", "--resolve", "payment="+payment.Addr())
		order := startApp(labapp.Config{Name: "order", Upstreams: []string{"http://payment/charge"}, ProxyURL: po.URL()})
		pg := startProxy("--service", "gateway", "--upstreams", "order=1", "--resolve", "order="+order.Addr())
		gateway := startApp(labapp.Config{Name: "gateway", Upstreams: []string{"http://order/checkout"}, ProxyURL: pg.URL()})
		send := func(n int) {
			for range n {
				resp, err := http.Get(gateway.URL() + "/buy")
				Expect(err).NotTo(HaveOccurred())
				Expect(resp.Body.Close()).To(Succeed())
			}
		}
		// Before Prometheus starts, so that every counter exists at its first scrape (see
		// internal/promquery's test).
		send(1)
		prom := promtest.Start(GinkgoT(), cp.RepoRoot, map[string]string{po.AdminAddr: "order", pg.AdminAddr: "gateway"})
		q, err := promquery.New(promquery.Options{URL: prom.URL, Window: 10 * time.Minute})
		Expect(err).NotTo(HaveOccurred())
		// The burst after the first scrape of both proxies: its samples are the window's start.
		pc, err := api.NewClient(api.Config{Address: prom.URL})
		Expect(err).NotTo(HaveOccurred())
		promAPI := promv1.NewAPI(pc)
		instant := func(q string) func() (string, error) {
			return func() (string, error) {
				v, _, _, err := promAPI.Query(ctx, q, time.Now())
				if err != nil {
					return "", err
				}
				return v.String(), nil
			}
		}
		Eventually(instant(`count(retrycap_proxy_requests_total)`)).Should(MatchRegexp(`^\{\} => 2 @`))
		send(20)
		Eventually(instant(`sum(retrycap_proxy_attempts_total{service="order"})`)).Should(MatchRegexp(`^\{\} => 63 @`))

		// A manager of its own with an Observer, watching this namespace only (the suite's
		// reconciler keeps running: it leaves the observed side as it finds it).
		mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
			Scheme: scheme.New(),
			Cache: func() cache.Options {
				o := cluster.CacheOptions()
				o.DefaultNamespaces = map[string]cache.Config{ns: {}}
				return o
			}(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		obs := &Observer{Query: q, Interval: 200 * time.Millisecond}
		Expect(mgr.Add(obs)).To(Succeed())
		Expect((&RetryPolicyReconciler{Observed: obs}).SetupWithManager(mgr)).To(Succeed())
		mctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		DeferCleanup(func() { stop(); <-done })

		edges := func(computed int64) []v1alpha1.ObservedEdge {
			return []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "3.00", Computed: computed, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", Computed: 1, Source: "retrycap-proxy"},
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
				Message: "2 edges observed over 10m0s, none with more tries than computed; observed amplification 3.00 along gateway>order>payment"}))
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
})
