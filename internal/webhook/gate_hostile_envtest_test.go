package webhook

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// What `kubectl apply` of a hostile object does through the real API server and the shipped
// webhook configuration: the gate says what analyze says of it (TestGateAgreesWithAnalyze
// compares the two on the same objects), never panics, and never admits what the policy forbids.
var _ = Describe("workload gate: hostile objects", Ordered, func() {
	ctx := context.Background()
	const ns = "gate-hostile"
	BeforeAll(func() { gateNamespace(ctx, ns, gatePolicy(ns, 4, v1alpha1.EnforcementReject)) })

	notCreated := func(obj client.Object) {
		GinkgoHelper()
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj))).To(BeTrue(), "%s was stored", obj.GetName())
	}

	It("warns of a retrycap annotation on a CronJob's spec.jobTemplate.metadata, which the matchConditions send to it", func() {
		c, warnings := gateClient()
		cj := nightlyCronJob(ns, "")
		cj.Spec.JobTemplate.Spec.Template.Annotations = nil
		cj.Spec.JobTemplate.Annotations = map[string]string{annotations.Upstreams: "payment=9"}
		Expect(c.Create(ctx, cj)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{`CronJob gate-hostile/nightly: annotation retrycap.dev/upstreams="payment=9" is on spec.jobTemplate.metadata, the Jobs' own, which retrycap does not read (their pods do not get it): put it on spec.jobTemplate.spec.template.metadata.annotations`}))
		// Judged on its pod template all the same: a malformed value there is refused, with the
		// warning still given.
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cj), cj)).To(Succeed())
		cj.Spec.JobTemplate.Spec.Template.Annotations = map[string]string{annotations.Upstreams: "payment=0"}
		Expect(c.Update(ctx, cj)).To(MatchError(gateDenied + `CronJob gate-hostile/nightly: annotation retrycap.dev/upstreams: token "payment=0" at column 1: attempts must be an integer 1..100`))
		Expect(warnings.take()).To(HaveLen(1))
	})

	It("refuses a miscased key on a workload's own metadata, as analyze calls it an error", func() {
		d := gateDeployment(ns, "order", "payment=1", partOfShop)
		d.Annotations = map[string]string{"retrycap.dev/Upstreams": "payment=9"}
		Expect(k8sClient.Create(ctx, d)).To(MatchError(gateDenied + `Deployment gate-hostile/order: annotation retrycap.dev/Upstreams="payment=9": annotation keys are case-sensitive and retrycap reads only retrycap.dev/upstreams, so this value would not be counted; rename the key`))
		notCreated(d)
	})

	It("refuses invisible and look-alike characters in upstreams and service names, naming the token", func() {
		for _, tc := range []struct{ key, value, msg string }{
			// An invisible character is quoted escaped (%q), so the message shows it.
			{annotations.Upstreams, "pay\u200bment=3", `Deployment gate-hostile/order: annotation retrycap.dev/upstreams: token "pay\u200bment=3" at column 1: `},
			{annotations.Upstreams, "p\u0430yment=3", "Deployment gate-hostile/order: annotation retrycap.dev/upstreams: token \"p\u0430yment=3\" at column 1: "},
			{annotations.Service, "ord\u200ber", `Deployment gate-hostile/order: annotation retrycap.dev/service: service name "ord\u200ber" is not a DNS-1123 label: `},
		} {
			d := gateDeployment(ns, "order", "", partOfShop)
			d.Spec.Template.Annotations[tc.key] = tc.value
			err := k8sClient.Create(ctx, d)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%q: %v", tc.value, err)
			Expect(err.Error()).To(HavePrefix(gateDenied+tc.msg), "%q", tc.value)
			notCreated(d)
		}
	})

	It("refuses a key with an invisible character (the API server would refuse it too), quoting it so that it shows", func() {
		d := gateDeployment(ns, "order", "payment=1", partOfShop)
		d.Spec.Template.Annotations["retrycap.dev/up\u200bstreams"] = "payment=9"
		Expect(k8sClient.Create(ctx, d)).To(MatchError(gateDenied + `Deployment gate-hostile/order: annotation "retrycap.dev/up\u200bstreams"="payment=9": the key holds '\u200b' (U+200B), which is not ASCII (a look-alike or an invisible character): the API server refuses such a key, and retrycap reads only retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}`))
		// A look-alike in the prefix is not retrycap's key: the API server refuses it.
		d = gateDeployment(ns, "order", "", partOfShop)
		d.Spec.Template.Annotations["retrycap.d\u0435v/upstreams"] = "payment=9"
		err := k8sClient.Create(ctx, d)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		notCreated(d)
	})

	It("judges a workload of 3,000 upstreams by its worst chain", func() {
		d := gateDeployment(ns, "order", manyUpstreams(3000, 1)+", payment=3", partOfShop)
		Expect(k8sClient.Create(ctx, d)).To(MatchError(gateDenied + "RetryPolicy gate-hostile/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"))
	})

	It("answers a 1 MiB annotation without failing: the API server then refuses the object as too long", func() {
		c, warnings := gateClient()
		d := gateDeployment(ns, "huge", "payment=1", partOfShop)
		d.Spec.Template.Annotations["retrycap.dev/x"] = strings.Repeat("x", 1<<20)
		err := c.Create(ctx, d)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).NotTo(ContainSubstring("failed calling webhook"))
		Expect(warnings.take()).To(Equal([]string{`Deployment gate-hostile/huge: annotation retrycap.dev/x="` + strings.Repeat("x", 200) + `... (1048576 bytes)" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`}))
		notCreated(d)

		// A malformed 1 MiB upstreams value: refused by the gate, its token quoted clipped.
		d = gateDeployment(ns, "huge", strings.Repeat("p", 1<<20)+"=0", partOfShop)
		err = c.Create(ctx, d)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(gateDenied + `Deployment gate-hostile/huge: annotation retrycap.dev/upstreams: token "` + strings.Repeat("p", 200) + `... (1048578 bytes)" at column 1: attempts must be an integer 1..100`))
		notCreated(d)
	})

	It("says what Rewrite changed first when thousands of stray keys would fill the API server's 4 KiB of warnings, and how many it left out", func() {
		const rns = "gate-hostile-rewrite"
		gateNamespace(ctx, rns, gatePolicy(rns, 4, v1alpha1.EnforcementRewrite))
		c, warnings := gateClient()
		d := gateDeployment(rns, "order", "payment=3", partOfShop)
		for i := range 5000 {
			d.Spec.Template.Annotations[fmt.Sprintf("retrycap.dev/x-%04d", i)] = "v"
		}
		Expect(c.Create(ctx, d)).To(Succeed())
		got := warnings.take()
		Expect(got).To(HaveLen(15))
		Expect(got[0]).To(Equal("RetryPolicy gate-hostile-rewrite/checkout rewrote retrycap.dev/upstreams of Deployment gate-hostile-rewrite/order: payment=3 -> payment=1 (gateway -x3-> order -x3-> payment = 9 > cap 4)"))
		Expect(got[1]).To(Equal(`Deployment gate-hostile-rewrite/order: annotation retrycap.dev/x-0000="v" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`))
		Expect(got[14]).To(Equal("4987 more warning(s) not shown (the API server keeps about 4 KiB of them): retrycap analyze -f on the manifest lists them all"))
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(annotations.Upstreams, "payment=1"))
	})

	It("refuses a dry run as it refuses the create, and stores nothing", func() {
		d := gateDeployment(ns, "order", "payment=3", partOfShop)
		Expect(k8sClient.Create(ctx, d, client.DryRunAll)).To(MatchError(gateDenied + "RetryPolicy gate-hostile/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"))
		d = gateDeployment(ns, "order", "", partOfShop)
		d.Annotations = map[string]string{"retrycap.dev/Upstreams": "payment=9"}
		Expect(k8sClient.Create(ctx, d, client.DryRunAll)).To(HaveOccurred())
		notCreated(d)
	})

	It("refuses the same hostile annotations on every kind: a bare Pod, a DaemonSet, a StatefulSet, a standalone ReplicaSet, a Job", func() {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare", Labels: partOfShop,
			Annotations: map[string]string{annotations.Upstreams: "pay\u200bment=3"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}
		Expect(k8sClient.Create(ctx, pod)).To(MatchError(gateDenied + `Pod gate-hostile/bare: annotation retrycap.dev/upstreams: token "pay\u200bment=3" at column 1: "pay\u200bment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed, and '\u200b' (U+200B) is not ASCII (a look-alike or an invisible character)`))
		tmpl := jobsTemplate("agent", "collector=2")
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
		sel := &metav1.LabelSelector{MatchLabels: tmpl.Labels}
		own := metav1.ObjectMeta{Namespace: ns, Name: "agent", Annotations: map[string]string{"retrycap.dev/INJECT": "true"}}
		for _, obj := range []client.Object{
			&appsv1.DaemonSet{ObjectMeta: own, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}},
			&appsv1.StatefulSet{ObjectMeta: own, Spec: appsv1.StatefulSetSpec{ServiceName: "agent", Selector: sel, Template: tmpl}},
			&appsv1.ReplicaSet{ObjectMeta: own, Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}},
		} {
			kind := fmt.Sprintf("%T", obj)[len("*v1."):]
			Expect(k8sClient.Create(ctx, obj)).To(MatchError(gateDenied+kind+` gate-hostile/agent: annotation retrycap.dev/INJECT="true": annotation keys are case-sensitive and retrycap reads only retrycap.dev/inject, so this value would not be counted; rename the key`), kind)
			notCreated(obj)
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "once"}, Spec: batchv1.JobSpec{Template: jobsTemplate("once", "payment=3")}}
		job.Spec.Template.Annotations[annotations.Inject] = "yes"
		Expect(k8sClient.Create(ctx, job)).To(MatchError(gateDenied + `Job gate-hostile/once: annotation retrycap.dev/inject: value "yes" is not "true" or "false"`))
	})

	It("answers a Rewrite dry run with the rewritten object, storing nothing", func() {
		const rns = "gate-hostile-rewrite" // the spec above made it, policy Rewrite at cap 4
		c, warnings := gateClient()
		d := gateDeployment(rns, "dry", "payment=3", partOfShop)
		d.Spec.Template.Annotations[annotations.Service] = "order"
		Expect(c.Create(ctx, d, client.DryRunAll)).To(Succeed())
		Expect(d.Spec.Template.Annotations).To(Equal(map[string]string{annotations.Service: "order", annotations.Upstreams: "payment=1", annotations.RewrittenFrom: "payment=3"}))
		Expect(warnings.take()).To(HaveLen(1))
		notCreated(d)
	})

	It("admits an update with no change, a scale, a status write and a delete; none of them changes the stored annotations", func() {
		c, warnings := gateClient()
		d := gateDeployment(ns, "order", "payment=1", partOfShop)
		Expect(c.Create(ctx, d)).To(Succeed())
		Expect(c.Update(ctx, d)).To(Succeed())
		Expect(warnings.take()).To(BeEmpty())

		scale := &autoscalingv1.Scale{}
		Expect(c.SubResource("scale").Get(ctx, d, scale)).To(Succeed())
		scale.Spec.Replicas = 3
		Expect(c.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale))).To(Succeed())

		// A status write that carries an over-cap template: the API server keeps the stored
		// spec (the gate is not asked: its rules name no subresource), so nothing is raised.
		var stored appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), &stored)).To(Succeed())
		raised := stored.DeepCopy()
		raised.Spec.Template.Annotations[annotations.Upstreams] = "payment=9"
		raised.Status.ObservedGeneration = stored.Generation
		Expect(c.Status().Update(ctx, raised)).To(Succeed())
		var after appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), &after)).To(Succeed())
		Expect(after.Spec.Template.Annotations).To(Equal(map[string]string{annotations.Upstreams: "payment=1"}))
		Expect(*after.Spec.Replicas).To(Equal(int32(3)))
		Expect(warnings.take()).To(BeEmpty())

		Expect(c.Delete(ctx, &after)).To(Succeed())
		cj := &batchv1.CronJob{}
		cj.Namespace, cj.Name = ns, "nightly"
		Expect(c.Delete(ctx, cj)).To(Succeed())
	})
})
