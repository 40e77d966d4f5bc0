package webhook_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/webhook"
)

// meshGatePorts (a case of TestGateMeshLayers: one manager per test binary): a Service's
// spec.ports change that turns a TCP port into one Istio retries reaches the membership webhook
// and is judged as a membership label is. Before, `kubectl patch service reviews` renaming port
// tcp-db to http-db was admitted with a cap-2 policy's chain going from 1 to 3 (the match
// condition compared only labels and annotations): the first dry run below stayed admitted ("")
// until the Eventually timed out. A renumbered TCP port is not sent (the request counter).
func meshGatePorts(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	status := func(p *v1alpha1.RetryPolicy) func() (int64, error) { return amplificationOf(ctx, c, p) }
	patch := func(svc *corev1.Service, op string, opts ...client.PatchOption) error {
		return c.Patch(ctx, svc.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[`+op+`]`)), opts...)
	}

	// productpage -> reviews -> ratings in an Istio namespace, both callees' only port TCP:
	// Istio retries neither hop, 1 x 1 within cap 2.
	const ns = "member-ports"
	policy := chainWithPolicy(g, op, ns, map[string]string{"istio-injection": "enabled"}, nil, 2, v1alpha1.EnforcementReject)
	services := map[string]*corev1.Service{}
	for _, name := range []string{"ratings", "reviews"} {
		services[name] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/name": name}, Ports: []corev1.ServicePort{{Name: "tcp-db", Port: 9080}}}}
		g.Expect(c.Create(ctx, services[name].DeepCopy())).To(Succeed())
	}
	g.Eventually(status(policy)).Should(Equal(int64(1)))
	reviews := services["reviews"]

	// Port tcp-db renamed http-db: Istio's default 3 tries on productpage -> reviews, 3 > cap 2.
	const denied = `admission webhook "membership.mesh.retrycap.dev" denied the request: `
	const over = `RetryPolicy member-ports/bookinfo: Service member-ports/reviews spec.ports[0].name: "tcp-db" -> "http-db" makes productpage -x3-> reviews -x1-> ratings = 3 > cap 2`
	const toHTTP = `{"op":"replace","path":"/spec/ports/0/name","value":"http-db"}`
	g.Eventually(func() string { return errString(patch(reviews, toHTTP, client.DryRunAll)) }).Should(Equal(denied + over))
	g.Expect(patch(reviews, toHTTP)).To(MatchError(denied + over))

	// appProtocol http on the tcp-db port: Istio reads it before the name.
	g.Expect(patch(reviews, `{"op":"add","path":"/spec/ports/0/appProtocol","value":"http"}`)).To(MatchError(denied +
		`RetryPolicy member-ports/bookinfo: Service member-ports/reviews spec.ports[0].appProtocol: unset -> "http" makes productpage -x3-> reviews -x1-> ratings = 3 > cap 2`))

	// The port renumbered, still tcp-db: the API server does not send it (9080 and 9081 are no
	// Istio well-known port); the renamed one is sent each time.
	n := webhook.MeshMembershipRequests()
	g.Expect(patch(reviews, `{"op":"replace","path":"/spec/ports/0/port","value":9081}`)).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n))
	g.Expect(patch(reviews, toHTTP, client.DryRunAll)).To(HaveOccurred())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n + 1))

	// Within the cap: admitted; back to TCP lowers, admitted under Reject (sent).
	g.Eventually(func() error {
		var cur v1alpha1.RetryPolicy
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), &cur); err != nil {
			return err
		}
		cur.Spec.MaxAmplification = 3
		return c.Update(ctx, &cur)
	}).Should(Succeed())
	g.Eventually(func() error { return patch(reviews, toHTTP, client.DryRunAll) }).Should(Succeed())
	g.Expect(patch(reviews, toHTTP)).To(Succeed())
	g.Eventually(status(policy)).Should(Equal(int64(3)))
	n = webhook.MeshMembershipRequests()
	g.Expect(patch(reviews, `{"op":"replace","path":"/spec/ports/0/name","value":"tcp-db"}`)).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n + 1))
	g.Eventually(status(policy)).Should(Equal(int64(1)))
	g.Expect(c.Delete(ctx, policy)).To(Succeed())
}

// meshGateWaypointGateway (a case of TestGateMeshLayers): an update of a waypoint Gateway that
// makes it take the service traffic a Service's istio.io/use-waypoint label sends it reaches the
// membership webhook and is judged. Before, `kubectl label gateway waypoint
// istio.io/waypoint-for=service --overwrite` was admitted with a cap-2 policy's chain going from
// 1 to 3 (the webhook had no gateways rule): the first dry run below stayed admitted ("") until
// the Eventually timed out. The Gateway's create is not sent (the Set assumes a named waypoint
// without its Gateway: creating it raises nothing), nor a label the Set does not read.
func meshGateWaypointGateway(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "member-waypoint"
	policy := chainWithPolicy(g, op, ns, map[string]string{"istio.io/dataplane-mode": "ambient"}, nil, 2, v1alpha1.EnforcementReject)
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "waypoint", "namespace": ns, "labels": map[string]any{"istio.io/waypoint-for": "workload"}},
		"spec": map[string]any{"gatewayClassName": "istio-waypoint",
			"listeners": []any{map[string]any{"name": "mesh", "port": int64(15008), "protocol": "HBONE"}}},
	}}
	n := webhook.MeshMembershipRequests()
	g.Expect(c.Create(ctx, gw.DeepCopy())).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n))
	// Service reviews labelled for the waypoint, which takes workload traffic only: no layer,
	// admitted once the watcher has the Gateway (before, the waypoint is assumed: 3 > 2).
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reviews", Labels: map[string]string{"istio.io/use-waypoint": "waypoint"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/name": "reviews"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	g.Eventually(func() error { return c.Create(ctx, svc.DeepCopy()) }).Should(Succeed())
	g.Eventually(func() (int64, error) {
		var cur v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(policy), &cur)
		return cur.Status.Amplification, err
	}).Should(Equal(int64(1)))

	label := func(key, value string, opts ...client.PatchOption) error {
		return c.Patch(ctx, gw.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+key+`":"`+value+`"}}}`)), opts...)
	}
	const want = `admission webhook "membership.mesh.retrycap.dev" denied the request: RetryPolicy member-waypoint/bookinfo: ` +
		`Gateway member-waypoint/waypoint metadata.labels["istio.io/waypoint-for"]: "workload" -> "service" makes productpage -x3-> reviews -x1-> ratings = 3 > cap 2`
	g.Eventually(func() string { return errString(label("istio.io/waypoint-for", "service", client.DryRunAll)) }).Should(Equal(want))
	g.Expect(label("istio.io/waypoint-for", "service")).To(MatchError(want))
	n = webhook.MeshMembershipRequests()
	g.Expect(label("team", "mesh")).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n))
	g.Expect(c.Delete(ctx, policy)).To(Succeed())
}
