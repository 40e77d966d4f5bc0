package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/promquery"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// istioExporter serves istio_requests_total series with every label Istio's stats plugin sets
// (istio/proxy source/extensions/stats), each sample with its own timestamp: first every
// counter at 0 at one instant, then (after jump) at its total one millisecond later. Two samples
// 1 ms apart make Prometheus' increase() exact and independent of scrape timing: the first
// sample is 0 (no extrapolation to the window's start) and the query comes later than 1.1
// sampling intervals after the last one (extrapolation by half an interval): 1.5 times the
// total.
type istioExporter struct {
	mu     sync.Mutex
	at     int64 // ms
	jumped bool
	edges  []istioEdge
}

type istioEdge struct {
	reporter, src, dst, ns string
	total                  int
	// srcNS is the caller's namespace when it is not ns (a gateway's).
	srcNS string
}

func (e *istioExporter) jump() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.jumped = true
}

func (e *istioExporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	at, v := e.at, func(ed istioEdge) int { return 0 }
	if e.jumped {
		at, v = e.at+1, func(ed istioEdge) int { return ed.total }
	}
	edges := e.edges
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	for _, ed := range edges {
		sns := ed.srcNS
		if sns == "" {
			sns = ed.ns
		}
		_, _ = fmt.Fprintf(w, `istio_requests_total{reporter=%q,source_workload=%q,source_workload_namespace=%q,source_principal="spiffe://cluster.local/ns/%s/sa/default",source_app=%q,source_version="v1",source_canonical_service=%q,source_canonical_revision="v1",source_cluster="Kubernetes",destination_workload=%q,destination_workload_namespace=%q,destination_principal="spiffe://cluster.local/ns/%s/sa/default",destination_app=%q,destination_version="v1",destination_service="%s.%s.svc.cluster.local",destination_service_name=%q,destination_service_namespace=%q,destination_canonical_service=%q,destination_canonical_revision="v1",destination_cluster="Kubernetes",request_protocol="http",response_code="200",grpc_response_status="",response_flags="-",connection_security_policy="mutual_tls"} %d %d`+"\n",
			ed.reporter, ed.src, sns, sns, ed.src, ed.src, ed.dst, ed.ns, ed.ns, ed.dst, ed.dst, ed.ns, ed.dst, ed.ns, ed.dst, v(ed), at)
	}
}

// graphCondition is GraphComplete without its timestamp, nil when absent.
func graphCondition(st v1alpha1.RetryPolicyStatus) *metav1.Condition {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionGraphComplete)
	if c == nil {
		return nil
	}
	out := *c
	out.LastTransitionTime = metav1.Time{}
	return &out
}

// chainOf is the part of a status the graph tests compare: the amplification, its path, the
// chains' entrypoints and amplifications, and WithinCap without its timestamp.
type chainOf struct {
	Amplification int64
	WorstPath     string
	Chains        []string
	Within        string
}

func chainsOf(st v1alpha1.RetryPolicyStatus) chainOf {
	c := chainOf{Amplification: st.Amplification, WorstPath: st.WorstPath}
	for _, ch := range st.Chains {
		c.Chains = append(c.Chains, fmt.Sprintf("%s=%d", ch.Entrypoint, ch.Amplification))
	}
	if w := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWithinCap); w != nil {
		c.Within = string(w.Status) + " " + w.Reason + ": " + w.Message
	}
	return c
}

// The WithinCap verdicts of the graph test's two namespaces (graph.Analysis's wording).
const (
	withinCapExceeded = "client -x1-> web -x3-> payment -x1-> cart -x4-> ledger = 12 > cap 10"
	withinQuiet       = "amplification 4 <= cap 10 (worst path cart>ledger)"
)

// countPolls counts the Observer's polls from now on.
func countPolls(obs *Observer) func() int {
	var mu sync.Mutex
	n := 0
	obs.OnChange(func() {
		mu.Lock()
		defer mu.Unlock()
		n++
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

var _ = Describe("Observed graph (--prometheus-url): status.graph and GraphComplete", func() {
	ctx := context.Background()

	It("counts the undeclared edges Istio observed in the amplification, lists them until declared, writes no status per poll; Prometheus down is Unknown", func() {
		// web -3-> payment, cart -4-> ledger are declared; Istio also saw payment call cart,
		// which nobody declares, and the ingress gateway call payment. graph-quiet holds the same
		// workloads and no traffic: the amplification on declarations alone.
		const ns, quiet = "graph-shop", "graph-quiet"
		for _, n := range []string{ns, quiet} {
			createNamespace(ctx, n)
			Expect(k8sClient.Create(ctx, deployment(n, "web", "payment=3", nil))).To(Succeed())
			Expect(k8sClient.Create(ctx, deployment(n, "payment", "", nil))).To(Succeed())
			Expect(k8sClient.Create(ctx, deployment(n, "cart", "ledger=4", nil))).To(Succeed())
			Expect(k8sClient.Create(ctx, deployment(n, "ledger", "", nil))).To(Succeed())
			waitForCachedWorkloads(ctx, n, 4)
			Expect(k8sClient.Create(ctx, policy(n, "checkout", 10, nil))).To(Succeed())
		}

		// Both reporters count each edge (payment's sidecar sees 3 tries per call from web). An
		// edge of another namespace is not this policy's.
		exp := &istioExporter{at: time.Now().Add(-time.Second).UnixMilli(), edges: []istioEdge{
			{reporter: "source", src: "web", dst: "payment", ns: ns, total: 400}, {reporter: "destination", src: "web", dst: "payment", ns: ns, total: 1200},
			{reporter: "source", src: "payment", dst: "cart", ns: ns, total: 1000}, {reporter: "destination", src: "payment", dst: "cart", ns: ns, total: 1000},
			{reporter: "source", src: "cart", dst: "ledger", ns: ns, total: 100}, {reporter: "destination", src: "cart", dst: "ledger", ns: ns, total: 400},
			{reporter: "source", src: "istio-ingressgateway", srcNS: "istio-system", dst: "payment", ns: ns, total: 200},
			{reporter: "source", src: "web", dst: "cart", ns: "graph-elsewhere", total: 300},
		}}
		srv := httptest.NewServer(exp)
		DeferCleanup(srv.Close)
		prom := promtest.StartTargets(GinkgoT(), cp.RepoRoot, []promtest.Target{{Addr: srv.Listener.Addr().String()}})
		// The zeros ingested first, then the totals.
		Eventually(promInstant(ctx, prom.URL, `count(istio_requests_total)`)).Should(MatchRegexp(`^\{\} => 8 @`))
		exp.jump()
		Eventually(promInstant(ctx, prom.URL, `count(count_over_time(istio_requests_total[10m]) == 2)`)).Should(MatchRegexp(`^\{\} => 8 @`))

		q, err := promquery.New(promquery.Options{URL: prom.URL, Window: 10 * time.Minute})
		Expect(err).NotTo(HaveOccurred())
		var polls func() int
		startObservedManager(ctx, q, []string{ns, quiet}, func(mgr ctrl.Manager, obs *Observer) error {
			polls = countPolls(obs)
			return (&RetryPolicyReconciler{Observed: obs, Index: fedIndex(mgr)}).SetupWithManager(mgr)
		})

		graphOf := func(n string) func() (*v1alpha1.GraphStatus, *metav1.Condition, chainOf, error) {
			return func() (*v1alpha1.GraphStatus, *metav1.Condition, chainOf, error) {
				st, err := statusOf(ctx, n, "checkout")()
				return st.Graph, graphCondition(st), chainsOf(st), err
			}
		}
		// 1,000 requests of payment>cart over the window, 1.5 times by increase()'s
		// extrapolation (see istioExporter), over 600 s: 2.50 per second. The amplification
		// counts it with one try: web -3-> payment -1-> cart -4-> ledger = 12 (declared alone:
		// 4, as graph-quiet shows); payment, called by the gateway, is an entrypoint too.
		note := "; counting 1 edge(s) observed by telemetry that no annotation declares, each with one application attempt times its mesh layers: the applications' own attempts on them are unknown (see GraphComplete)"
		counted := chainOf{Amplification: 12, WorstPath: "web>payment>cart>ledger", Chains: []string{"web=12", "payment=4"},
			Within: "False CapExceeded: " + withinCapExceeded + note}
		Eventually(func(g Gomega) {
			gs, c, ch, err := graphOf(ns)()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Window).To(Equal("10m0s"))
			g.Expect(gs.Sources).To(Equal([]string{"istio"}))
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 3, Declared: 2, Undeclared: 1, Stale: 0}))
			g.Expect(gs.Undeclared).To(Equal([]v1alpha1.GraphEdge{{From: "payment", To: "cart", RatePerSecond: "2.50"}}))
			g.Expect(gs.Stale).To(BeEmpty())
			g.Expect(c).To(Equal(&metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionFalse, Reason: "UndeclaredEdges", ObservedGeneration: 1,
				Message: `1 edge(s) observed over 10m0s (from istio) are not declared: payment>cart (2.50/s; declare: retrycap.dev/upstreams "cart" on payment); the amplification counts each with one application attempt times its mesh layers: the application's own attempts on them are unknown`}))
			g.Expect(ch).To(Equal(counted))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			gs, c, ch, err := graphOf(quiet)()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 0, Declared: 2, Undeclared: 0, Stale: 2}))
			// Istio's series exist (for graph-shop), none of this policy's edges had calls: nothing
			// was compared, which is not "complete" (before: True GraphComplete).
			g.Expect(c).To(Equal(&metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionUnknown, Reason: "NoObservedEdges", ObservedGeneration: 1,
				Message: "no edge of the policy had calls over 10m0s (from istio): nothing compared (no traffic in the window, or its workloads are not seen by these sources); 2 declared"}))
			g.Expect(ch).To(Equal(chainOf{Amplification: 4, WorstPath: "cart>ledger", Chains: []string{"cart=4", "web=3"}, Within: "True WithinCap: " + withinQuiet}))
		}).Should(Succeed())

		// No status write per poll: observedAt moves on every poll (every 200 ms here), the
		// content does not. Ten polls, the same resourceVersion.
		key := types.NamespacedName{Namespace: ns, Name: "checkout"}
		// graph-quiet's Unknown (NoObservedEdges) is kept alike.
		quietKey := types.NamespacedName{Namespace: quiet, Name: "checkout"}
		var before, quietBefore v1alpha1.RetryPolicy
		Expect(k8sClient.Get(ctx, key, &before)).To(Succeed())
		Expect(k8sClient.Get(ctx, quietKey, &quietBefore)).To(Succeed())
		from := polls()
		Eventually(polls, "30s").Should(BeNumerically(">=", from+10))
		var after, quietAfter v1alpha1.RetryPolicy
		Expect(k8sClient.Get(ctx, key, &after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
		Expect(after.Status.Graph.ObservedAt).To(Equal(before.Status.Graph.ObservedAt))
		Expect(k8sClient.Get(ctx, quietKey, &quietAfter)).To(Succeed())
		Expect(quietAfter.ResourceVersion).To(Equal(quietBefore.ResourceVersion))

		// Prometheus down: Unknown, naming the URL and the error; the last observation is kept
		// for one window (its time and the window's end in the message), and still counted.
		prom.Stop()
		host := prom.URL[len("http://"):]
		ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
		want := regexp.MustCompile("^" + regexp.QuoteMeta(fmt.Sprintf("querying Prometheus at %s: query %s: dial tcp %s: connect: connection refused; keeping the observation of ",
			prom.URL, telemetry.Queries(10*time.Minute, "service")[0].PromQL, host)) + ts + " until " + ts + regexp.QuoteMeta(" (one window)") + "$")
		Eventually(func(g Gomega) {
			gs, c, ch, err := graphOf(ns)()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).NotTo(BeNil())
			g.Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"Unknown", "PrometheusUnavailable"}))
			g.Expect(c.Message).To(MatchRegexp(want.String()))
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 3, Declared: 2, Undeclared: 1, Stale: 0}))
			g.Expect(ch).To(Equal(counted))
		}).Should(Succeed())
	})
})

var _ = Describe("Observed graph (--prometheus-url) on a ClusterRetryPolicy", func() {
	ctx := context.Background()

	It("counts an undeclared edge across namespaces in the amplification, nodes named name.ns, until declared", func() {
		// web (graph-front) -3-> payment (graph-orders); cart -4-> ledger; Istio saw payment
		// call cart too, which nobody declares.
		const front, orders = "graph-front", "graph-orders"
		sel := map[string]string{chainLabel: "graph"}
		Expect(k8sClient.Create(ctx, labelledNamespace(front, sel))).To(Succeed())
		Expect(k8sClient.Create(ctx, labelledNamespace(orders, sel))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(front, "web", "payment."+orders+"=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(orders, "payment", "", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(orders, "cart", "ledger=4", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(orders, "ledger", "", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, front, 1)
		waitForCachedWorkloads(ctx, orders, 3)
		Expect(k8sClient.Create(ctx, clusterPolicy("graph-checkout", 10, sel))).To(Succeed())
		DeferCleanup(func() {
			Expect(k8sClient.Delete(ctx, &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "graph-checkout"}})).To(Succeed())
		})

		exp := &istioExporter{at: time.Now().Add(-time.Second).UnixMilli(), edges: []istioEdge{
			{reporter: "source", src: "web", srcNS: front, dst: "payment", ns: orders, total: 400},
			{reporter: "source", src: "payment", dst: "cart", ns: orders, total: 1000},
			{reporter: "source", src: "cart", dst: "ledger", ns: orders, total: 100},
		}}
		srv := httptest.NewServer(exp)
		DeferCleanup(srv.Close)
		prom := promtest.StartTargets(GinkgoT(), cp.RepoRoot, []promtest.Target{{Addr: srv.Listener.Addr().String()}})
		Eventually(promInstant(ctx, prom.URL, `count(istio_requests_total)`)).Should(MatchRegexp(`^\{\} => 3 @`))
		exp.jump()
		Eventually(promInstant(ctx, prom.URL, `count(count_over_time(istio_requests_total[10m]) == 2)`)).Should(MatchRegexp(`^\{\} => 3 @`))
		q, err := promquery.New(promquery.Options{URL: prom.URL, Window: 10 * time.Minute})
		Expect(err).NotTo(HaveOccurred())
		startObservedManager(ctx, q, []string{front, orders}, func(mgr ctrl.Manager, obs *Observer) error {
			return (&ClusterRetryPolicyReconciler{Observed: obs, Index: fedIndex(mgr)}).SetupWithManager(mgr)
		})

		web, payment, cart, ledger := "web."+front, "payment."+orders, "cart."+orders, "ledger."+orders
		path := web + ">" + payment + ">" + cart + ">" + ledger
		exceeded := "False CapExceeded: client -x1-> " + web + " -x3-> " + payment + " -x1-> " + cart + " -x4-> " + ledger + " = 12 > cap 10"
		graphOf := func() (*v1alpha1.GraphStatus, *metav1.Condition, chainOf, error) {
			st, err := clusterStatusOf(ctx, "graph-checkout")()
			return st.Graph, graphCondition(st), chainsOf(st), err
		}
		Eventually(func(g Gomega) {
			gs, c, ch, err := graphOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 3, Declared: 2, Undeclared: 1, Stale: 0}))
			g.Expect(gs.Undeclared).To(Equal([]v1alpha1.GraphEdge{{From: payment, To: cart, RatePerSecond: "2.50"}}))
			g.Expect(c).To(Equal(&metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionFalse, Reason: "UndeclaredEdges", ObservedGeneration: 1,
				Message: `1 edge(s) observed over 10m0s (from istio) are not declared: ` + payment + `>` + cart + ` (2.50/s; declare: retrycap.dev/upstreams "cart" on ` + payment + `); the amplification counts each with one application attempt times its mesh layers: the application's own attempts on them are unknown`}))
			g.Expect(ch).To(Equal(chainOf{Amplification: 12, WorstPath: path, Chains: []string{web + "=12"}, Within: exceeded + "; " + status.ObservedEdgesNote(1)}))
		}).Should(Succeed())

		// Declared: complete, the same amplification, now from the declaration.
		updateDeployment(ctx, orders, "payment", func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{annotations.Upstreams: "cart"}
		})
		Eventually(func(g Gomega) {
			gs, c, ch, err := graphOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 3, Declared: 3, Undeclared: 0, Stale: 0}))
			g.Expect(c).To(Equal(&metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionTrue, Reason: "GraphComplete", ObservedGeneration: 1,
				Message: "every edge observed over 10m0s (3, from istio) is declared; 3 declared, 0 of them not observed (stale)"}))
			g.Expect(ch).To(Equal(chainOf{Amplification: 12, WorstPath: path, Chains: []string{web + "=12"}, Within: exceeded}))
		}).Should(Succeed())
	})
})
