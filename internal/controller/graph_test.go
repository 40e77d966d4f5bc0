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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/promquery"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
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
		_, _ = fmt.Fprintf(w, `istio_requests_total{reporter=%q,source_workload=%q,source_workload_namespace=%q,source_principal="spiffe://cluster.local/ns/%s/sa/default",source_app=%q,source_version="v1",source_canonical_service=%q,source_canonical_revision="v1",source_cluster="Kubernetes",destination_workload=%q,destination_workload_namespace=%q,destination_principal="spiffe://cluster.local/ns/%s/sa/default",destination_app=%q,destination_version="v1",destination_service="%s.%s.svc.cluster.local",destination_service_name=%q,destination_service_namespace=%q,destination_canonical_service=%q,destination_canonical_revision="v1",destination_cluster="Kubernetes",request_protocol="http",response_code="200",grpc_response_status="",response_flags="-",connection_security_policy="mutual_tls"} %d %d`+"\n",
			ed.reporter, ed.src, ed.ns, ed.ns, ed.src, ed.src, ed.dst, ed.ns, ed.ns, ed.dst, ed.dst, ed.ns, ed.dst, ed.ns, ed.dst, v(ed), at)
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

var _ = Describe("Observed graph (--prometheus-url): status.graph and GraphComplete", func() {
	ctx := context.Background()

	It("lists the edges Istio observed that no annotation declares, until they are declared; Prometheus down is Unknown", func() {
		const ns = "graph-shop"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, deployment(ns, "web", "payment", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "payment", "", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "cart", "", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 3)
		Expect(k8sClient.Create(ctx, policy(ns, "checkout", 10, nil))).To(Succeed())

		// web calls payment (declared) and cart (not declared); both reporters count each edge
		// (payment's sidecar sees 2 tries per call). An edge of another namespace is not this
		// policy's.
		exp := &istioExporter{at: time.Now().Add(-time.Second).UnixMilli(), edges: []istioEdge{
			{"source", "web", "payment", ns, 400}, {"destination", "web", "payment", ns, 800},
			{"source", "web", "cart", ns, 1000}, {"destination", "web", "cart", ns, 1000},
			{"source", "web", "cart", "graph-elsewhere", 300},
		}}
		srv := httptest.NewServer(exp)
		DeferCleanup(srv.Close)
		prom := promtest.StartTargets(GinkgoT(), cp.RepoRoot, []promtest.Target{{Addr: srv.Listener.Addr().String()}})
		// The zeros ingested first, then the totals.
		Eventually(promInstant(ctx, prom.URL, `count(istio_requests_total)`)).Should(MatchRegexp(`^\{\} => 5 @`))
		exp.jump()
		Eventually(promInstant(ctx, prom.URL, `count(count_over_time(istio_requests_total[10m]) == 2)`)).Should(MatchRegexp(`^\{\} => 5 @`))

		q, err := promquery.New(promquery.Options{URL: prom.URL, Window: 10 * time.Minute})
		Expect(err).NotTo(HaveOccurred())
		startObservedManager(ctx, q, []string{ns}, func(mgr ctrl.Manager, obs *Observer) error {
			return (&RetryPolicyReconciler{Observed: obs, Index: fedIndex(mgr)}).SetupWithManager(mgr)
		})

		graphOf := func() (*v1alpha1.GraphStatus, *metav1.Condition, error) {
			st, err := statusOf(ctx, ns, "checkout")()
			return st.Graph, graphCondition(st), err
		}
		// 1,000 requests of web>cart over the window, 1.5 times by increase()'s extrapolation
		// (see istioExporter), over 600 s: 2.50 per second.
		Eventually(func(g Gomega) {
			gs, c, err := graphOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Window).To(Equal("10m0s"))
			g.Expect(gs.Sources).To(Equal([]string{"istio"}))
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 2, Declared: 1, Undeclared: 1, Stale: 0}))
			g.Expect(gs.Undeclared).To(Equal([]v1alpha1.GraphEdge{{From: "web", To: "cart", RatePerSecond: "2.50"}}))
			g.Expect(gs.Stale).To(BeEmpty())
			g.Expect(c).To(Equal(&metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionFalse, Reason: "UndeclaredEdges", ObservedGeneration: 1,
				Message: `1 edge(s) observed over 10m0s (from istio) are not declared: web>cart (2.50/s; declare: retrycap.dev/upstreams "cart" on web); the amplification is computed on the declared edges alone and does not count them (the application's own attempts on them are unknown)`}))
		}).Should(Succeed())

		// Declared: complete.
		setUpstreams(ctx, ns, "web", "payment, cart")
		Eventually(func(g Gomega) {
			gs, c, err := graphOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 2, Declared: 2, Undeclared: 0, Stale: 0}))
			g.Expect(gs.Undeclared).To(BeEmpty())
			g.Expect(c).To(Equal(&metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionTrue, Reason: "GraphComplete", ObservedGeneration: 1,
				Message: "every edge observed over 10m0s (2, from istio) is declared; 2 declared, 0 of them not observed (stale)"}))
		}).Should(Succeed())

		// Prometheus down: Unknown, naming the URL and the error; the last observation is kept
		// for one window (its time and the window's end in the message).
		prom.Stop()
		host := prom.URL[len("http://"):]
		ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
		want := regexp.MustCompile("^" + regexp.QuoteMeta(fmt.Sprintf("querying Prometheus at %s: query %s: dial tcp %s: connect: connection refused; keeping the observation of ",
			prom.URL, telemetry.Queries(10*time.Minute, "service")[0].PromQL, host)) + ts + " until " + ts + regexp.QuoteMeta(" (one window)") + "$")
		Eventually(func(g Gomega) {
			gs, c, err := graphOf()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).NotTo(BeNil())
			g.Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"Unknown", "PrometheusUnavailable"}))
			g.Expect(c.Message).To(MatchRegexp(want.String()))
			g.Expect(gs).NotTo(BeNil())
			g.Expect(gs.Counts).To(Equal(v1alpha1.GraphCounts{Observed: 2, Declared: 2, Undeclared: 0, Stale: 0}))
		}).Should(Succeed())
	})
})
