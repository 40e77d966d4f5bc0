package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// The admission benchmark of docs/benchmarks/admission.md. It creates 5000 Deployments, so it
// runs only when asked:
//
//	RETRYCAP_BENCH=admission go test ./internal/webhook -run TestWebhooks -count=1 -v -args -ginkgo.focus='admission latency'
var _ = Describe("admission latency with 5000 workloads in the cache", Ordered, func() {
	const (
		ns        = "bench"
		workloads = 5000
		samples   = 2000
	)
	ctx := context.Background()

	BeforeAll(func() {
		if os.Getenv("RETRYCAP_BENCH") != "admission" {
			Skip("set RETRYCAP_BENCH=admission to run the admission benchmark")
		}
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		// 1000 chains of five services: svc-i calls svc-i+1 with 2 attempts; every chain's last
		// service calls the shared "auth". All selected by one policy with default entrypoints.
		start := time.Now()
		createChains(ctx, ns, workloads-1)
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "auth", "", partOfShop))).To(Succeed())
		p := gatePolicy(ns, 64, v1alpha1.EnforcementReject) // the chains multiply to 2^5 = 32
		p.Spec.Entrypoints = nil
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(func() int { return gateWebhooks.Gate.index.Len(ns) }, 2*time.Minute).Should(Equal(workloads))
		waitForPolicy(ctx, p)
		fmt.Fprintf(GinkgoWriter, "created %d Deployments in %s\n", workloads, time.Since(start).Round(time.Millisecond))
	})

	request := func(op admissionv1.Operation, d, old *appsv1.Deployment) admission.Request {
		d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		raw, err := json.Marshal(d)
		Expect(err).NotTo(HaveOccurred())
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "bench", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Namespace: ns, Name: d.Name, Operation: op, Object: k8sruntime.RawExtension{Raw: raw}}}
		if old != nil {
			old.TypeMeta = d.TypeMeta
			req.OldObject.Raw, err = json.Marshal(old)
			Expect(err).NotTo(HaveOccurred())
		}
		return req
	}
	percentiles := func(ds []time.Duration) string {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		at := func(q float64) time.Duration { return ds[int(q*float64(len(ds)-1))] }
		return fmt.Sprintf("p50 %s  p99 %s  max %s  (n=%d)", at(0.50), at(0.99), ds[len(ds)-1], len(ds))
	}
	measure := func(name string, req admission.Request, wantAllowed bool) {
		ds := make([]time.Duration, 0, samples)
		runtime.GC() // start each case from the same heap
		for i := 0; i < samples; i++ {
			t := time.Now()
			resp := gateWebhooks.Gate.Handle(ctx, req)
			ds = append(ds, time.Since(t))
			Expect(resp.Allowed).To(Equal(wantAllowed), "%s: %v", name, resp.Result)
		}
		fmt.Printf("handler  %-58s %s\n", name, percentiles(ds))
	}

	It("handler decision time", func() {
		// A create in the middle of a chain: svc-0 -x2-> svc-1 -x2-> svc-2 -x9-> svc-3 -x2-> svc-4 -x2-> auth.
		over := gateDeployment(ns, "svc-2", "svc-3=9", partOfShop)
		measure("create over the cap (Reject, message + plan)", request(admissionv1.Create, over, nil), false)
		within := gateDeployment(ns, "svc-2", "svc-3=1", partOfShop)
		measure("create within the cap", request(admissionv1.Create, within, nil), true)
		stored := gateDeployment(ns, "svc-2", "svc-3=2", partOfShop)
		bump := stored.DeepCopy()
		bump.Spec.Template.Spec.Containers[0].Image = "retrycap/lab-app:v2"
		measure("update that raises nothing (image bump)", request(admissionv1.Update, bump, stored), true)
		// Worst case: every one of the 5000 workloads reaches auth, so its judgement reads all.
		auth := gateDeployment(ns, "auth", "db=3", partOfShop)
		measure("create of the service all 5000 reach (worst case)", request(admissionv1.Create, auth, nil), false)
		authStored := gateDeployment(ns, "auth", "", partOfShop)
		authBump := authStored.DeepCopy()
		authBump.Spec.Template.Spec.Containers[0].Image = "retrycap/lab-app:v2"
		measure("image bump of the service all 5000 reach", request(admissionv1.Update, authBump, authStored), true)
	})

	It("end-to-end admission latency through the API server (dry-run creates)", func() {
		run := func(name string, d *appsv1.Deployment, wantErr bool) {
			ds := make([]time.Duration, 0, 500)
			for i := 0; i < 500; i++ {
				obj := d.DeepCopy()
				t := time.Now()
				err := k8sClient.Create(ctx, obj, client.DryRunAll)
				ds = append(ds, time.Since(t))
				if wantErr {
					Expect(err).To(MatchError(ContainSubstring(gateDenied+"RetryPolicy bench/checkout: svc-0 -x2-> svc-1 -x2-> svc-2 -x9-> svc-3")), name)
				} else {
					Expect(err).NotTo(HaveOccurred(), name)
				}
			}
			fmt.Printf("apiserver %-57s %s\n", name, percentiles(ds))
		}
		canary := gateDeployment(ns, "svc-2-canary", "svc-3=9", partOfShop)
		canary.Spec.Template.Annotations[annotations.Service] = "svc-2"
		run("dry-run create, over the cap (refused by the gate)", canary, true)
		run("dry-run create, within the cap (admitted)", gateDeployment(ns, "new-svc", "svc-3=1", partOfShop), false)
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-empty"}})).To(Succeed())
		run("dry-run create, namespace without policy (baseline)", gateDeployment("bench-empty", "new-svc", "svc-3=3", partOfShop), false)
	})
})
