package webhook_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh/crds"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// TestGateMeshLayers runs the whole manager (operator.NewManager: the mesh watcher's Set wired
// into the workload gate) against a real API server with Istio's and the Gateway API's real CRDs: a Deployment whose
// upstreams make bookinfo's chain is judged with Istio's default 2 retries on every meshed hop,
// and only in a meshed namespace; the mesh webhook judges VirtualServices against RetryPolicies
// and ClusterRetryPolicies (meshGateClusterPolicy). An external test package: internal/operator imports this one.
func TestGateMeshLayers(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	istio, err := crds.Istio()
	g.Expect(err).NotTo(HaveOccurred())
	gatewayAPI, err := crds.GatewayAPI(crds.Experimental) // HTTPRoute's rules[].retry
	g.Expect(err).NotTo(HaveOccurred())
	envoyGateway, err := crds.EnvoyGatewayBackendTrafficPolicy() // meshGateEnvoyGatewayDelay
	g.Expect(err).NotTo(HaveOccurred())
	kuma, err := crds.Kuma() // meshGateKumaMembership
	g.Expect(err).NotTo(HaveOccurred())
	op := operatortest.Start(t, append([]string{istio, gatewayAPI, envoyGateway}, kuma...)...)
	c, ctx := op.Client, op.Ctx

	// The same chain in a meshed and an unmeshed namespace, no VirtualService: productpage
	// -x1-> reviews -x1-> ratings, a cap-4 Reject policy in each.
	for ns, labels := range map[string]map[string]string{"bookinfo": {"istio-injection": "enabled"}, "plain": nil} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})).To(Succeed())
		g.Eventually(func() error {
			return c.Create(ctx, &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
				Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, Enforcement: v1alpha1.EnforcementReject}})
		}).Should(Succeed())
		for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}} {
			// reviews -x3-> ratings alone is 3: within the cap.
			g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
		}
	}

	// productpage makes the chain 3 x 3 = 9 under Istio's default: refused, with the layers. The
	// gate reads the Set the watcher builds from the Namespace's labels: until it has them (a
	// dry run each time) the create would pass.
	const want = "admission webhook \"gate.retrycap.dev\" denied the request: RetryPolicy bookinfo/bookinfo: " +
		"productpage -x3-> reviews -x3-> ratings = 9 > cap 4; " +
		"productpage -x3-> reviews: 3 = 1 (Deployment productpage) x 3 (Istio default, no VirtualService binds reviews); " +
		"reviews -x3-> ratings: 3 = 1 (Deployment reviews) x 3 (Istio default, no VirtualService binds ratings); " +
		"even with productpage: reviews=1 the edge is 3 tries (the mesh's layers) where the cap leaves it 1: " +
		"lower the 3 tries of productpage -> reviews (Istio default, no VirtualService binds reviews), " +
		"the 3 tries of reviews -> ratings (Istio default, no VirtualService binds ratings), or raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 4"
	g.Eventually(dryRunDenial(op, bookinfoDeployment("bookinfo", "productpage", "reviews=1"))).Should(Equal(want))
	g.Expect(c.Create(ctx, bookinfoDeployment("bookinfo", "productpage", "reviews=1"))).To(MatchError(want))

	// The same in the unmeshed namespace: 1 x 1 x 1.
	g.Expect(c.Create(ctx, bookinfoDeployment("plain", "productpage", "reviews=1"))).To(Succeed())

	// The mesh webhook judges the policies of the namespaces a VirtualService is exported to,
	// not only its own (istio-config has none): reviews -x5-> ratings = 5 > cap 4.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-config"}})).To(Succeed())
	const wantVS = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy bookinfo/bookinfo: " +
		"VirtualService istio-config/ratings spec.http[0].retries.attempts: 4 makes reviews -x5-> ratings = 5 > cap 4; " +
		"VirtualService istio-config/ratings may keep attempts: 3"
	g.Eventually(dryRunDenial(op, exportedVirtualService(4))).Should(Equal(wantVS))
	g.Expect(c.Create(ctx, exportedVirtualService(3))).To(Succeed())

	t.Run("the ConfigMaps whose retries the manager counts are judged", func(t *testing.T) { meshGateConfigMaps(t, op) })
	t.Run("membership labels of Namespaces and Services are judged", func(t *testing.T) { meshGateMembership(t, op) })
	t.Run("Kuma's injection labels of Namespaces and pod templates are judged, its annotations not", func(t *testing.T) { meshGateKumaMembership(t, op) })
	t.Run("a Service's port turned from TCP to HTTP is judged", func(t *testing.T) { meshGatePorts(t, op) })
	t.Run("a waypoint Gateway turned to take service traffic is judged", func(t *testing.T) { meshGateWaypointGateway(t, op) })
	t.Run("a ClusterRetryPolicy judges mesh objects", func(t *testing.T) { meshGateClusterPolicy(t, op) })
	t.Run("a raised mesh timeout is judged against maxTimeToAnswer", func(t *testing.T) { meshGateTimeoutRaise(t, op) })
	t.Run("a time verdict no count of tries fits names the timeouts, not the callers' attempts", func(t *testing.T) { meshGateTimeAdvice(t, op) })
	t.Run("every route to an entrypoint is lowered at once", func(t *testing.T) { meshGateEntryRoutes(t, op) })
	t.Run("a Gateway API rule is rewritten within its CRD", func(t *testing.T) { meshGateRuleFloor(t, op) })
	t.Run("the status names an entry route at its floor and the edges below", func(t *testing.T) { statusEntryRouteFloor(t, op) })
	t.Run("a ServiceEntry registering an external HTTP host is judged", func(t *testing.T) { meshGateServiceEntry(t, op) })
	t.Run("an Envoy Gateway fault delay is judged against maxTimeToAnswer", func(t *testing.T) { meshGateEnvoyGatewayDelay(t, op) })
	t.Run("gate19: a new entry rule lowered, a rewrite that cannot fit refused, calls released, a Gateway's policy timeout", func(t *testing.T) { meshGate19(t, op) })
	t.Run("a new Envoy Gateway BackendTrafficPolicy's retry and timeout are judged", func(t *testing.T) { meshGateEnvoyGatewayNewPolicy(t, op) })
	t.Run("routes new to an edge are judged (tries from their fewest, timeouts by the chain)", func(t *testing.T) { meshGateNewRoutes(t, op) })
	t.Run("a route lowered to attempts 0 keeps its per-try bound as its timeout", func(t *testing.T) { meshGateZeroKeepsPerTry(t, op) })
	// Last: it makes the manager read Linkerd.
	t.Run("Linkerd timeouts on a route other than the counted one are judged", func(t *testing.T) { meshGateLinkerdRoutes(t, op) })
}

// dryRunDenial is, for Eventually, why a dry-run create of obj is refused ("" while it is
// admitted: the webhooks judge once the manager's caches and the mesh watcher have caught up).
func dryRunDenial(op *operatortest.Operator, obj client.Object) func() string {
	return func() string {
		if err := op.Client.Create(op.Ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}
}

// exportedVirtualService binds bookinfo's ratings from namespace istio-config, exported to
// bookinfo, with attempts retries.
func exportedVirtualService(attempts int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "ratings", "namespace": "istio-config"},
		"spec": map[string]any{
			"hosts":    []any{"ratings.bookinfo.svc.cluster.local"},
			"exportTo": []any{"bookinfo"},
			"http": []any{map[string]any{
				"route":   []any{map[string]any{"destination": map[string]any{"host": "ratings.bookinfo.svc.cluster.local"}}},
				"retries": map[string]any{"attempts": attempts},
			}},
		},
	}}
	return u
}

func bookinfoDeployment(ns, name, upstreams string) *appsv1.Deployment {
	ann := map[string]string{}
	if upstreams != "" {
		ann[annotations.Upstreams] = upstreams
	}
	lbl := map[string]string{"app.kubernetes.io/name": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: ann},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
			},
		},
	}
}
