package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// The red team's pass on the workload gate and the injector through the real API server: hostile
// upstreams values as a create, a dry run and an update; objects named by generateName only;
// updates that raise nothing on a workload stored over its cap before the policy; every kind the
// gate reads; a pod of 1,000 containers through the injector.
var _ = Describe("webred: the admission webhooks under attack", Ordered, func() {
	ctx := context.Background()
	const ns = "webred"
	BeforeAll(func() {
		gateNamespace(ctx, ns, gatePolicy(ns, 4, v1alpha1.EnforcementReject))
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "order", "payment=1", partOfShop))).To(Succeed())
		waitForUpstreams(ctx, ns, "order", "payment=1")
	})
	// canary is a second workload of service order (gateway -x3-> order), named name.
	canary := func(name, upstreams string) *appsv1.Deployment {
		d := gateDeployment(ns, name, "", partOfShop)
		d.Spec.Template.Annotations = map[string]string{annotations.Service: "order", annotations.Upstreams: upstreams}
		return d
	}

	It("refuses every hostile upstreams value as a create, a dry run and an update, naming the object, the annotation, the token and the column", func() {
		const digits = "attempts must be an integer 1..100"
		const duration = `per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`
		for _, tc := range []struct {
			value, token string
			col          int
			reason       string
		}{
			{"payment=\uff13", "payment=\uff13", 1, digits + ", and '\uff13' (U+FF13) is not ASCII (a look-alike or an invisible character)"}, // fullwidth 3
			{"payment=\u0663", "payment=\u0663", 1, digits + ", and '\u0663' (U+0663) is not ASCII (a look-alike or an invisible character)"}, // Arabic-Indic 3
			{"payment=+3", "payment=+3", 1, digits},
			{"payment=3.0", "payment=3.0", 1, digits},
			{"payment=1e1", "payment=1e1", 1, digits},
			{"pay\u00a0ment=3", "pay\u00a0ment=3", 1, `"pay\u00a0ment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed, and '\u00a0' (U+00A0) is not ASCII (a look-alike or an invisible character)`},
			{"pay\tment=3", "pay\tment=3", 1, `"pay\tment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`},
			{"pay\nment=3", "pay\nment=3", 1, `"pay\nment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`},
			{"payment=9223372036854775808", "payment=9223372036854775808", 1, digits}, // 2^63
			{"payment=1000000000000000000000000000000", "payment=1000000000000000000000000000000", 1, digits},
			{"payment=1*9223372036854775808", "payment=1*9223372036854775808", 1, "calls must be an integer 1..1000"},
			{"payment=1, payment=2", "payment=2", 12, `upstream "payment" is listed twice (first at column 1)`},
			{"a=3,,b=2", "", 5, "empty entry (two commas, or a comma at the start or end)"},
			{"=3", "=3", 1, "missing service name"},
			{"a=", "a=", 1, digits},
			{"a=3/", "a=3/", 1, duration},
			{"a=3/2x", "a=3/2x", 1, duration},
			{"a=3/-1s", "a=3/-1s", 1, duration},
			{"a=3/1h1h", "a=3/1h1h", 1, "per-try timeout 1h1h is out of range 1ms..1h0m0s"},
		} {
			msg := func(name string) string {
				return gateDenied + fmt.Sprintf("Deployment webred/%s: annotation retrycap.dev/upstreams: token %q at column %d: %s", name, tc.token, tc.col, tc.reason)
			}
			Expect(k8sClient.Create(ctx, canary("hostile", tc.value))).To(MatchError(msg("hostile")), "create %q", tc.value)
			Expect(k8sClient.Create(ctx, canary("hostile", tc.value), client.DryRunAll)).To(MatchError(msg("hostile")), "dry run %q", tc.value)
			Expect(setUpstreams(ctx, k8sClient, ns, "order", tc.value)).To(MatchError(msg("order")), "update %q", tc.value)
			Expect(setUpstreamsDryRun(ctx, ns, "order", tc.value)).To(MatchError(msg("order")), "update dry run %q", tc.value)
			var stored appsv1.Deployment
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "order"}, &stored)).To(Succeed())
			Expect(stored.Spec.Template.Annotations[annotations.Upstreams]).To(Equal("payment=1"))
		}
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hostile"}, &appsv1.Deployment{}))).To(BeTrue())
	})

	It("reads a leading zero, and blanks (NBSP, tab, newline) around a number, as the number: judged, not ignored", func() {
		const over = gateDenied + "RetryPolicy webred/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"
		for _, v := range []string{"payment=03", "payment=\u00a03", "payment=\t3", "payment=3\n"} {
			Expect(k8sClient.Create(ctx, canary("hostile", v))).To(MatchError(over), "create %q", v)
			Expect(k8sClient.Create(ctx, canary("hostile", v), client.DryRunAll)).To(MatchError(over), "dry run %q", v)
			Expect(setUpstreams(ctx, k8sClient, ns, "order", v)).To(MatchError(over), "update %q", v)
		}
	})

	It("judges 10,000 upstreams by the worst, and refuses a bad 10,001st naming its column", func() {
		many := manyUpstreams(10000, 1)
		Expect(k8sClient.Create(ctx, canary("hostile", many+", payment=3"))).To(MatchError(gateDenied + "RetryPolicy webred/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"))
		Expect(setUpstreams(ctx, k8sClient, ns, "order", many+", payment=3")).To(MatchError(gateDenied + "RetryPolicy webred/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"))
		Expect(setUpstreams(ctx, k8sClient, ns, "order", many+", up-9999=2")).To(MatchError(gateDenied + fmt.Sprintf(`Deployment webred/order: annotation retrycap.dev/upstreams: token "up-9999=2" at column %d: upstream "up-9999" is listed twice (first at column %d)`, len(many)+3, len(many)-len("up-9999=1")+1)))
	})

	It("refuses a hostile value on a selected workload in Audit and Rewrite too, and only warns of it on a workload no policy selects", func() {
		for _, mode := range []v1alpha1.Enforcement{v1alpha1.EnforcementAudit, v1alpha1.EnforcementRewrite} {
			mns := "webred-" + strings.ToLower(string(mode))
			gateNamespace(ctx, mns, gatePolicy(mns, 4, mode))
			d := gateDeployment(mns, "hostile", "payment=\uff13", partOfShop)
			Expect(k8sClient.Create(ctx, d)).To(MatchError(gateDenied + "Deployment " + mns + "/hostile: annotation retrycap.dev/upstreams: token \"payment=\uff13\" at column 1: attempts must be an integer 1..100, and '\uff13' (U+FF13) is not ASCII (a look-alike or an invisible character)"))
		}
		c, warnings := gateClient()
		d := gateDeployment(ns, "loner", "payment=\uff13", nil)
		Expect(c.Create(ctx, d, client.DryRunAll)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{"Deployment webred/loner: annotation retrycap.dev/upstreams: token \"payment=\uff13\" at column 1: attempts must be an integer 1..100, and '\uff13' (U+FF13) is not ASCII (a look-alike or an invisible character)"}))
	})

	It("rewrites 10,000 over-cap upstreams in one answer, its warning cut to the API server's budget", func() {
		const rns = "webred-rewrite" // the spec above made it, policy Rewrite at cap 4
		c, warnings := gateClient()
		d := gateDeployment(rns, "many", manyUpstreams(10000, 3), partOfShop)
		d.Spec.Template.Annotations[annotations.Service] = "order"
		Expect(c.Create(ctx, d, client.DryRunAll)).To(Succeed())
		Expect(d.Spec.Template.Annotations[annotations.Upstreams]).To(Equal(manyUpstreams(10000, 1)))
		Expect(d.Spec.Template.Annotations[annotations.RewrittenFrom]).To(Equal(manyUpstreams(10000, 3)))
		got := warnings.take()
		total := 0
		for _, w := range got {
			total += len([]rune(w))
		}
		Expect(got).To(HaveLen(1))
		Expect(got[0]).To(HavePrefix("RetryPolicy webred-rewrite/checkout rewrote retrycap.dev/upstreams of Deployment webred-rewrite/many: up-0=3, up-1=3"))
		Expect(got[0]).To(MatchRegexp(`\.\.\. \(cut from \d+ bytes\)$`))
		Expect(total).To(Equal(3300)) // gate.WarningBudget 3,500 less the 200 kept for a summary line
	})

	It("admits an empty value as no upstreams (the grammar's empty list), and says nothing", func() {
		c, warnings := gateClient()
		Expect(c.Create(ctx, canary("empty", ""), client.DryRunAll)).To(Succeed())
		Expect(warnings.take()).To(BeEmpty())
	})

	It("refuses an over-cap workload of every kind the gate reads, as a create and a dry run; a ReplicaSet a Deployment owns is not sent to it", func() {
		const over = gateDenied + "RetryPolicy webred/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"
		tmpl := func(restart corev1.RestartPolicy) corev1.PodTemplateSpec {
			t := jobsTemplate("kinds", "payment=3")
			t.Annotations[annotations.Service] = "order"
			t.Spec.RestartPolicy = restart
			return t
		}
		sel := &metav1.LabelSelector{MatchLabels: tmpl(corev1.RestartPolicyAlways).Labels}
		meta := metav1.ObjectMeta{Namespace: ns, Name: "kinds"}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kinds", Labels: partOfShop,
			Annotations: map[string]string{annotations.Service: "order", annotations.Upstreams: "payment=3"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}
		for _, obj := range []client.Object{
			&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{ServiceName: "kinds", Selector: sel, Template: tmpl(corev1.RestartPolicyAlways)}},
			&appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl(corev1.RestartPolicyAlways)}},
			&appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl(corev1.RestartPolicyAlways)}},
			&batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tmpl(corev1.RestartPolicyNever)}},
			&batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 2 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl(corev1.RestartPolicyNever)}}}},
			pod,
		} {
			Expect(k8sClient.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)).To(MatchError(over), "%T dry run", obj)
			Expect(k8sClient.Create(ctx, obj)).To(MatchError(over), "%T", obj)
		}
		var order appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "order"}, &order)).To(Succeed())
		owned := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-5d4f8c7b9",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "order", UID: order.UID, Controller: ptrTo(true)}}},
			Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl(corev1.RestartPolicyAlways)}}
		Expect(k8sClient.Create(ctx, owned, client.DryRunAll)).To(Succeed())
	})

	Context("generateName", Ordered, func() {
		const gns = "webred-gen"
		BeforeAll(func() { gateNamespace(ctx, gns, gatePolicy(gns, 4, v1alpha1.EnforcementReject)) })
		generated := func(prefix string, labels, ann map[string]string) *appsv1.Deployment {
			l := map[string]string{"app": "generated"}
			for k, v := range labels {
				l[k] = v
			}
			return &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: gns, GenerateName: prefix, Labels: l},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "generated"}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: ann},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}},
			}
		}
		It("names a malformed object by its generateName, not by a stand-in that looks like a stored name", func() {
			d := generated("gateway-", partOfShop, map[string]string{annotations.Upstreams: "payment=0"})
			const msg = gateDenied + `Deployment webred-gen/gateway-<generated>: annotation retrycap.dev/upstreams: token "payment=0" at column 1: attempts must be an integer 1..100`
			Expect(k8sClient.Create(ctx, d.DeepCopy(), client.DryRunAll)).To(MatchError(msg))
			Expect(k8sClient.Create(ctx, d)).To(MatchError(msg))
		})
		It("keeps the stored Deployment gateway in the graph when generateName gateway- is over the cap through it", func() {
			d := generated("gateway-", partOfShop, map[string]string{annotations.Service: "order", annotations.Upstreams: "payment=3"})
			const over = gateDenied + "RetryPolicy webred-gen/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"
			Expect(k8sClient.Create(ctx, d.DeepCopy(), client.DryRunAll)).To(MatchError(over))
			Expect(k8sClient.Create(ctx, d)).To(MatchError(over))
		})
		It("judges an unnamed service as the fresh service its generated name makes, not as the stored one its prefix names", func() {
			// No service annotation, no app.kubernetes.io/name: the service is the generated name,
			// which nothing calls yet; "order" (gateway -x3-> order) is another service.
			d := generated("order-", partOfShop, map[string]string{annotations.Upstreams: "payment=3"})
			Expect(k8sClient.Create(ctx, d, client.DryRunAll)).To(Succeed())
		})
		It("names a generateName object in a Rewrite's warning and a bare Pod's refusal by its prefix", func() {
			const rns = "webred-gen-rewrite"
			gateNamespace(ctx, rns, gatePolicy(rns, 4, v1alpha1.EnforcementRewrite))
			c, warnings := gateClient()
			d := generated("order-", partOfShop, map[string]string{annotations.Service: "order", annotations.Upstreams: "payment=3"})
			d.Namespace = rns
			Expect(c.Create(ctx, d, client.DryRunAll)).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{"RetryPolicy webred-gen-rewrite/checkout rewrote retrycap.dev/upstreams of Deployment webred-gen-rewrite/order-<generated>: payment=3 -> payment=1 (gateway -x3-> order -x3-> payment = 9 > cap 4)"}))
			Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(annotations.Upstreams, "payment=1"))
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: gns, GenerateName: "batch-", Labels: partOfShop,
				Annotations: map[string]string{annotations.Upstreams: "payment=1/1h1h"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}
			Expect(k8sClient.Create(ctx, pod)).To(MatchError(gateDenied + `Pod webred-gen/batch-<generated>: annotation retrycap.dev/upstreams: token "payment=1/1h1h" at column 1: per-try timeout 1h1h is out of range 1ms..1h0m0s`))
		})

		It("admits generateName gateway- within the cap beside the stored gateway, and a stored workload over the cap stays judged as itself", func() {
			d := generated("gateway-", partOfShop, map[string]string{annotations.Service: "gateway", annotations.Upstreams: "order=1"})
			Expect(k8sClient.Create(ctx, d, client.DryRunAll)).To(Succeed())
			Expect(d.Name).To(HavePrefix("gateway-"))
		})
	})

	Context("a workload stored over its cap before the policy", Ordered, func() {
		const sns = "webred-stored"
		BeforeAll(func() {
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sns}})).To(Succeed())
			Expect(k8sClient.Create(ctx, gateDeployment(sns, "gateway", "order=3", partOfShop))).To(Succeed())
			Expect(k8sClient.Create(ctx, gateDeployment(sns, "order", "payment=3", partOfShop))).To(Succeed())
			// Malformed, admitted while no policy selected it.
			Expect(k8sClient.Create(ctx, gateDeployment(sns, "legacy", "payment=+3", partOfShop))).To(Succeed())
			Expect(k8sClient.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sns, Name: "legacy-pod",
				Labels:      map[string]string{"app.kubernetes.io/name": "legacy-pod", "app.kubernetes.io/part-of": "shop"},
				Annotations: map[string]string{annotations.Inject: "yes", annotations.Upstreams: "payment=3"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}})).To(Succeed())
			p := gatePolicy(sns, 4, v1alpha1.EnforcementReject)
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			waitForPolicy(ctx, p)
			waitForUpstreams(ctx, sns, "order", "payment=3")
			waitForUpstreams(ctx, sns, "gateway", "order=3")
			// The gate does refuse it as it stands.
			again := gateDeployment(sns, "order2", "payment=3", partOfShop)
			again.Spec.Template.Annotations[annotations.Service] = "order"
			Expect(k8sClient.Create(ctx, again, client.DryRunAll)).To(MatchError(gateDenied + "RetryPolicy webred-stored/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"))
		})
		It("admits a status write, a metadata.labels change and a template label change, with no warning", func() {
			c, warnings := gateClient()
			var d appsv1.Deployment
			Expect(c.Get(ctx, client.ObjectKey{Namespace: sns, Name: "order"}, &d)).To(Succeed())
			d.Status.ObservedGeneration = d.Generation
			d.Status.Replicas = 1
			Expect(c.Status().Update(ctx, &d)).To(Succeed())
			d.Labels["team"] = "payments"
			Expect(c.Update(ctx, &d)).To(Succeed())
			Expect(c.Update(ctx, &d, client.DryRunAll)).To(Succeed())
			d.Spec.Template.Labels["tier"] = "backend"
			Expect(c.Update(ctx, &d)).To(Succeed())
			Expect(warnings.take()).To(BeEmpty())
			// Raising it is refused.
			d.Spec.Template.Annotations[annotations.Upstreams] = "payment=4"
			Expect(c.Update(ctx, &d)).To(MatchError(gateDenied + "RetryPolicy webred-stored/checkout: gateway -x3-> order -x4-> payment = 12 > cap 4; order may keep payment=1"))
		})
		It("admits an update that leaves a malformed value stored before the policy as it is, warning of it; refuses one that changes it to another malformed value", func() {
			const bad = "Deployment webred-stored/legacy: annotation retrycap.dev/upstreams: token \"payment=+3\" at column 1: attempts must be an integer 1..100"
			c, warnings := gateClient()
			var d appsv1.Deployment
			Expect(c.Get(ctx, client.ObjectKey{Namespace: sns, Name: "legacy"}, &d)).To(Succeed())
			d.Labels["team"] = "payments"
			Expect(c.Update(ctx, &d, client.DryRunAll)).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{bad}))
			Expect(c.Update(ctx, &d)).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{bad}))
			// kubectl rollout restart, a finalizer added and removed, as controllers do.
			d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-12-03T17:00:00Z"
			d.Finalizers = []string{"webred.test/hold"}
			Expect(c.Update(ctx, &d)).To(Succeed())
			d.Finalizers = nil
			Expect(c.Update(ctx, &d)).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{bad, bad}))
			d.Spec.Template.Annotations[annotations.Upstreams] = "payment=+4"
			Expect(c.Update(ctx, &d)).To(MatchError(gateDenied + "Deployment webred-stored/legacy: annotation retrycap.dev/upstreams: token \"payment=+4\" at column 1: attempts must be an integer 1..100"))
			d.Spec.Template.Annotations[annotations.Upstreams] = "payment=1"
			Expect(c.Update(ctx, &d)).To(Succeed())
			warnings.take()

			// Beside a malformed inject, valid upstreams are read: an update that leaves the
			// annotations as they are but renames the service (its label) into gateway's chain
			// raises them, and is refused; a label change that raises nothing is admitted.
			const badInject = `Pod webred-stored/legacy-pod: annotation retrycap.dev/inject: value "yes" is not "true" or "false"`
			var pod corev1.Pod
			Expect(c.Get(ctx, client.ObjectKey{Namespace: sns, Name: "legacy-pod"}, &pod)).To(Succeed())
			pod.Labels["team"] = "payments"
			Expect(c.Update(ctx, &pod)).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{badInject}))
			pod.Labels["app.kubernetes.io/name"] = "order"
			Expect(c.Update(ctx, &pod)).To(MatchError(gateDenied + badInject))

			// A malformed value on a workload no policy selects is warned of; moving it under the
			// policy (its template's labels) is refused, the value unchanged.
			stray := gateDeployment(sns, "stray", "payment=+3", nil)
			Expect(c.Create(ctx, stray)).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{"Deployment webred-stored/stray: annotation retrycap.dev/upstreams: token \"payment=+3\" at column 1: attempts must be an integer 1..100"}))
			stray.Spec.Template.Labels["app.kubernetes.io/part-of"] = "shop"
			Expect(c.Update(ctx, stray)).To(MatchError(gateDenied + "Deployment webred-stored/stray: annotation retrycap.dev/upstreams: token \"payment=+3\" at column 1: attempts must be an integer 1..100"))
		})
	})

	It("injects a pod of 1,000 containers that set HTTP_PROXY: all stored, the proxy added, the warnings within 4 KiB", func() {
		const ins = "webred-inject"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ins,
			Labels: map[string]string{annotations.InjectionLabel: annotations.InjectionEnabled}}})).To(Succeed())
		p := gatePolicy(ins, 4, v1alpha1.EnforcementReject)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ins)
			g.Expect(labels).To(HaveKeyWithValue(annotations.InjectionLabel, annotations.InjectionEnabled))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.RetryPolicy{})).To(Succeed())
		}, cacheWait).Should(Succeed())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ins, Name: "wide", Labels: map[string]string{"app.kubernetes.io/name": "wide", "app.kubernetes.io/part-of": "shop"}}}
		for i := range 1000 {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "x",
				Env: []corev1.EnvVar{{Name: "HTTP_PROXY", Value: "http://corp:3128"}}})
		}
		original := pod.DeepCopy() // Create fills pod with what was stored
		c, warnings := gateClient()
		Expect(c.Create(ctx, pod)).To(Succeed())
		got := warnings.take()
		Expect(got).To(HaveLen(39))
		Expect(got[0]).To(HavePrefix("container c0 sets HTTP_PROXY itself"))
		Expect(got[38]).To(Equal("962 more warning(s) not shown (the API server keeps about 4 KiB of them): the pod's annotation retrycap.dev/injection-warnings holds the first 4 KiB, each container's env shows its own"))
		total := 0
		for _, w := range got {
			total += len([]rune(w))
		}
		Expect(total).To(BeNumerically("<=", 3500))
		var stored corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &stored)).To(Succeed())
		Expect(stored.Spec.Containers).To(HaveLen(1000))
		Expect(stored.Spec.InitContainers).To(HaveLen(1))
		Expect(stored.Spec.InitContainers[0].Name).To(Equal("retrycap-proxy"))
		Expect(stored.Annotations).To(HaveKeyWithValue(annotations.InjectedStatus, ins+"/checkout"))
		Expect(len(stored.Annotations["retrycap.dev/injection-warnings"])).To(BeNumerically("<=", 4096))
		// A container that sets HTTP_PROXY is left alone (admission.md): its env is its own.
		for i, ctr := range stored.Spec.Containers {
			Expect(ctr.Env).To(Equal([]corev1.EnvVar{{Name: "HTTP_PROXY", Value: "http://corp:3128"}}), "container %d", i)
		}
		// The answer itself, as the API server receives it: the patch adds the proxy, the
		// annotations and nothing per container.
		raw, err := json.Marshal(original)
		Expect(err).NotTo(HaveOccurred())
		resp := podInjector.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "webred", Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: ins, Object: runtime.RawExtension{Raw: raw}}})
		Expect(resp.Allowed).To(BeTrue())
		var paths []string
		for _, op := range resp.Patches {
			paths = append(paths, op.Operation+" "+op.Path)
		}
		Expect(paths).To(ConsistOf("add /metadata/annotations", "add /spec/initContainers"))
		answer, err := json.Marshal(resp.AdmissionResponse)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("injector's answer for 1,000 containers: %d bytes, %d patch operations\n", len(answer), len(resp.Patches))
		// Measured 3,659 bytes (the 4 KiB of warnings are most of it).
		Expect(len(answer)).To(BeNumerically("<", 8<<10))
	})
})

// setUpstreamsDryRun is setUpstreams as a dry run (kubectl apply --dry-run=server).
func setUpstreamsDryRun(ctx context.Context, ns, name, upstreams string) error {
	var d appsv1.Deployment
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	d.Spec.Template.Annotations[annotations.Upstreams] = upstreams
	return k8sClient.Update(ctx, &d, client.DryRunAll)
}
