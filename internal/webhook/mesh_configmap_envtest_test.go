package webhook_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/scheme"
	"github.com/retrycap/retrycap/internal/webhook"
)

// meshGateConfigMaps runs first in TestGateMeshLayers (its manager and Istio's CRDs; it
// removes the MeshConfig it leaves, so the later cases count Istio's default): the mesh gate
// judges the ConfigMaps whose retries it counts, ingress-nginx's controller ConfigMap (named by
// the controller's --configmap) and Istio's MeshConfig, in webhook configmaps.mesh.retrycap.dev
// of retrycap-mesh, whose match condition names exactly those: no other ConfigMap write reaches
// the manager. Before, `kubectl patch configmap ingress-nginx-controller -p
// '{"data":{"proxy-next-upstream-tries":"10"}}'` was admitted with a cap-8 policy's chain at 10
// (the status counted it at the next reconcile).
func meshGateConfigMaps(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	// ingress-nginx as its static deploy.yaml installs it: the controller reads
	// ingress-nginx/ingress-nginx-controller (3 tries), and serves class nginx; Ingress shop-cm/web
	// routes to frontend, which calls api once: client -x3-> frontend -x1-> api = 3, cap 8.
	for _, ns := range []string{"ingress-nginx", "shop-cm", "other"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress-nginx", Name: "ingress-nginx-controller"},
		Data: map[string]string{"proxy-next-upstream-tries": "3"}}
	g.Expect(c.Create(ctx, cm.DeepCopy())).To(Succeed())
	g.Expect(c.Create(ctx, nginxController("ingress-nginx-controller", "$(POD_NAMESPACE)/ingress-nginx-controller", "k8s.io/ingress-nginx", "nginx"))).To(Succeed())
	class := "nginx"
	g.Expect(c.Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"api", ""}, {"frontend", "api=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment("shop-cm", d.name, d.upstreams)) }).Should(Succeed())
	}
	prefix := networkingv1.PathTypePrefix
	g.Expect(c.Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop-cm", Name: "web"},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "frontend", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}})).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop-cm", Name: "shop"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 8, Enforcement: v1alpha1.EnforcementReject}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())
	g.Eventually(func() (int64, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(policy), &p)
		return p.Status.Amplification, err
	}).Should(Equal(int64(3)))

	// The manager's webhook for the ConfigMaps it reads: Istio's MeshConfigs (Istio's API is
	// read) and the controller's ConfigMap, by exact namespace/name.
	const istioCond = "(request.namespace == 'istio-system' && (request.name == 'istio' || (object != null && has(object.metadata.labels) && " +
		"'istio.io/rev' in object.metadata.labels && object.metadata.labels['istio.io/rev'] != 'default' && request.name == 'istio-' + object.metadata.labels['istio.io/rev'])))"
	g.Eventually(configMapHook(op)).Should(Equal(istioCond + ` || (request.namespace + '/' + request.name) in ["ingress-nginx/ingress-nginx-controller"]`))
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	g.Expect(c.Get(ctx, types.NamespacedName{Name: webhook.MeshWebhookConfiguration}, &cfg)).To(Succeed())
	g.Expect(cfg.Webhooks).To(HaveLen(3)) // mesh, configmaps, membership (mesh_membership.go)
	hook := cfg.Webhooks[1]
	g.Expect(*hook.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
	g.Expect(hook.Rules).To(HaveLen(1))
	g.Expect(hook.Rules[0].Operations).To(Equal([]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}))
	g.Expect(hook.Rules[0].Resources).To(Equal([]string{"configmaps"}))

	// 10 tries: client -x10-> frontend -x1-> api = 10 > cap 8, refused.
	patch := func(c client.Client, tries string, opts ...client.PatchOption) error {
		return c.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"data":{"proxy-next-upstream-tries":"`+tries+`"}}`)), opts...)
	}
	const denied = `admission webhook "configmaps.mesh.retrycap.dev" denied the request: `
	const over = `RetryPolicy shop-cm/shop: ConfigMap ingress-nginx/ingress-nginx-controller data["proxy-next-upstream-tries"]: "3" -> "10" makes client -x10-> frontend -x1-> api = 10 > cap 8; ` +
		`ConfigMap ingress-nginx/ingress-nginx-controller may keep proxy-next-upstream-tries: "8"`
	g.Eventually(func() string { return errString(patch(c, "10", client.DryRunAll)) }).Should(Equal(denied + over))
	g.Expect(patch(c, "10")).To(MatchError(denied + over))
	// A bad value: refused naming the ConfigMap, the key and the value.
	g.Expect(patch(c, "-1")).To(MatchError(denied + `ConfigMap ingress-nginx/ingress-nginx-controller data.proxy-next-upstream-tries: "-1" is not a whole number of tries (ingress-nginx's proxy-next-upstream-tries)`))
	// Within the cap: admitted, and counted.
	g.Expect(patch(c, "8")).To(Succeed())
	g.Eventually(func() (int64, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(policy), &p)
		return p.Status.Amplification, err
	}).Should(Equal(int64(8)))

	// A ConfigMap of the same name and keys in another namespace, which no controller reads,
	// never reaches the webhook (the API server evaluates the match condition), while each
	// write of the controller's does.
	n := webhook.MeshConfigMapRequests()
	g.Expect(patch(c, "9", client.DryRunAll)).To(HaveOccurred())
	g.Expect(webhook.MeshConfigMapRequests()).To(Equal(n + 1))
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "ingress-nginx-controller"},
		Data: map[string]string{"proxy-next-upstream-tries": "3"}}
	g.Expect(c.Create(ctx, other)).To(Succeed())
	other.Data["proxy-next-upstream-tries"] = "100"
	g.Expect(c.Update(ctx, other)).To(Succeed())
	g.Expect(webhook.MeshConfigMapRequests()).To(Equal(n + 1))

	// Rewrite: a ConfigMap is never rewritten (its owner, Helm, would write it back): refused.
	setEnforcement(g, op, policy, v1alpha1.EnforcementRewrite)
	over10 := strings.Replace(over, `"3" -> "10"`, `"8" -> "10"`, 1)
	g.Eventually(func() string { return errString(patch(c, "10", client.DryRunAll)) }).Should(Equal(denied + over10 +
		" (refused although enforcement is Rewrite: retrycap does not rewrite a ConfigMap, whose owner would write it back; lower the value)"))

	// Audit: admitted with the warning.
	setEnforcement(g, op, policy, v1alpha1.EnforcementAudit)
	var w warnings
	wcfg := rest.CopyConfig(op.CP.Config)
	wcfg.WarningHandler = &w
	wc, err := client.New(wcfg, client.Options{Scheme: scheme.New()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { return patch(wc, "10") }).Should(Succeed())
	g.Expect(w.take()).To(Equal([]string{over10 + " (admitted: enforcement is Audit)"}))

	// A second controller naming another ConfigMap: the match condition names it too.
	g.Expect(c.Create(ctx, nginxController("internal-controller", "ingress-nginx/internal-config", "example.com/internal", "internal"))).To(Succeed())
	g.Eventually(configMapHook(op)).Should(Equal(istioCond + ` || (request.namespace + '/' + request.name) in ["ingress-nginx/ingress-nginx-controller", "ingress-nginx/internal-config"]`))
	n = webhook.MeshConfigMapRequests()
	g.Eventually(func() error {
		return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress-nginx", Name: "internal-config"},
			Data: map[string]string{"proxy-next-upstream-tries": "2"}}, client.DryRunAll)
	}).Should(Succeed())
	g.Expect(webhook.MeshConfigMapRequests()).To(BeNumerically(">", n))

	// Istio's MeshConfig: a meshed namespace's chain under Istio's default, 3 x 3 = 9, cap 9.
	meshed := chainWithPolicy(g, op, "mesh-cm", map[string]string{"istio-injection": "enabled"}, nil, 9, v1alpha1.EnforcementReject)
	g.Eventually(func() (int64, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(meshed), &p)
		return p.Status.Amplification, err
	}).Should(Equal(int64(9)))
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}})).To(Succeed())
	meshConfig := func(name, rev, attempts string) *corev1.ConfigMap {
		m := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: name},
			Data: map[string]string{"mesh": "defaultHttpRetryPolicy:\n  attempts: " + attempts + "\n"}}
		if rev != "" {
			m.Labels = map[string]string{"istio.io/rev": rev}
		}
		return m
	}
	// Fewer retries: admitted. More: refused, named by the MeshConfig's field.
	g.Expect(c.Create(ctx, meshConfig("istio", "", "1"))).To(Succeed())
	g.Eventually(func() (int64, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(meshed), &p)
		return p.Status.Amplification, err
	}).Should(Equal(int64(4)))
	const overIstio = `RetryPolicy mesh-cm/bookinfo: ConfigMap istio-system/istio data["mesh"] defaultHttpRetryPolicy.attempts: 1 -> 3 makes productpage -x4-> reviews -x4-> ratings = 16 > cap 9; ` +
		`ConfigMap istio-system/istio may keep defaultHttpRetryPolicy.attempts: 2`
	g.Expect(c.Update(ctx, meshConfig("istio", "", "3"))).To(MatchError(denied + overIstio))
	// A canary revision's MeshConfig is judged on create (its label names it), the most
	// retries of the two counted; a ConfigMap of that name without the label is none.
	g.Expect(c.Create(ctx, meshConfig("istio-canary", "canary", "3"))).To(MatchError(denied +
		`RetryPolicy mesh-cm/bookinfo: ConfigMap istio-system/istio-canary data["mesh"] defaultHttpRetryPolicy.attempts: unset -> 3 makes productpage -x4-> reviews -x4-> ratings = 16 > cap 9; ` +
		`ConfigMap istio-system/istio-canary may keep defaultHttpRetryPolicy.attempts: 2`))
	n = webhook.MeshConfigMapRequests()
	g.Expect(c.Create(ctx, meshConfig("istio-canary", "", "5"))).To(Succeed())
	g.Expect(webhook.MeshConfigMapRequests()).To(Equal(n))
	// A bad value: refused naming the ConfigMap, the field and the value.
	g.Expect(c.Update(ctx, meshConfig("istio", "", "-2"))).To(MatchError(denied + "ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: -2 is negative"))

	// A delete is not judged (it returns the defaults): Istio's 2 retries again, for the later cases.
	g.Expect(c.Delete(ctx, meshConfig("istio", "", "1"))).To(Succeed())
	g.Eventually(func() (int64, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(meshed), &p)
		return p.Status.Amplification, err
	}).Should(Equal(int64(9)))
}

// configMapHook is, for Eventually, the match condition of retrycap-mesh's ConfigMap webhook
// ("" while it has none).
func configMapHook(op *operatortest.Operator) func() (string, error) {
	return func() (string, error) {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := op.Client.Get(op.Ctx, types.NamespacedName{Name: webhook.MeshWebhookConfiguration}, &cfg); err != nil {
			return "", err
		}
		for _, h := range cfg.Webhooks {
			if h.Name == webhook.MeshConfigMapWebhookName && len(h.MatchConditions) == 1 {
				return h.MatchConditions[0].Expression, nil
			}
		}
		return "", nil
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// nginxController is an ingress-nginx controller Deployment in namespace ingress-nginx reading
// --configmap=configMap, serving --controller-class and --ingress-class.
func nginxController(name, configMap, controllerClass, ingressClass string) *appsv1.Deployment {
	lbl := map[string]string{"app.kubernetes.io/name": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ingress-nginx", Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "registry.k8s.io/ingress-nginx/controller:v1.15.1",
					Args: []string{"/nginx-ingress-controller", "--controller-class=" + controllerClass, "--ingress-class=" + ingressClass, "--configmap=" + configMap},
					Env:  []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}}}},
			},
		},
	}
}
