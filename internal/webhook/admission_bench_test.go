package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
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

// The admission benchmark of docs/benchmarks/admission.md. It creates 5000 Deployments (and
// 5000 more across ten namespaces for the ClusterRetryPolicy case below), so it runs only when
// asked:
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

// benchRequest is an admission request for a Deployment (old non-nil: an update).
func benchRequest(op admissionv1.Operation, d, old *appsv1.Deployment) admission.Request {
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	raw, err := json.Marshal(d)
	Expect(err).NotTo(HaveOccurred())
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "bench", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: d.Namespace, Name: d.Name, Operation: op, Object: k8sruntime.RawExtension{Raw: raw}}}
	if old != nil {
		old.TypeMeta = d.TypeMeta
		req.OldObject.Raw, err = json.Marshal(old)
		Expect(err).NotTo(HaveOccurred())
	}
	return req
}

// benchMeasure calls the gate's handler samples times with req and prints the percentiles.
func benchMeasure(ctx context.Context, name string, req admission.Request, wantAllowed bool, samples int) {
	ds := make([]time.Duration, 0, samples)
	runtime.GC() // start each case from the same heap
	for i := 0; i < samples; i++ {
		t := time.Now()
		resp := gateWebhooks.Gate.Handle(ctx, req)
		ds = append(ds, time.Since(t))
		Expect(resp.Allowed).To(Equal(wantAllowed), "%s: %v", name, resp.Result)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) time.Duration { return ds[int(q*float64(len(ds)-1))] }
	fmt.Printf("handler  %-58s p50 %s  p99 %s  max %s  (n=%d)\n", name, at(0.50), at(0.99), ds[len(ds)-1], len(ds))
}

// The same worst case under a ClusterRetryPolicy whose graph spans ten namespaces: chains of five
// whose every hop goes into the next namespace, 500 workloads per namespace, the last of each
// chain calling the shared auth of bench-c0. Run in the same process as the RetryPolicy case
// above (the same command), so the two sets of figures are side by side.
var _ = Describe("admission latency with a ClusterRetryPolicy over 5000 workloads in 10 namespaces", Ordered, func() {
	const (
		workloads = 5000
		samples   = 2000
		label     = "retrycap.dev/bench-cluster"
	)
	ctx := context.Background()
	ns := func(i int) string { return fmt.Sprintf("bench-c%d", i%10) }
	crp := &v1alpha1.ClusterRetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-chain"},
		Spec: v1alpha1.ClusterRetryPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}},
			RetryPolicySpec:   v1alpha1.RetryPolicySpec{MaxAmplification: 64, Enforcement: v1alpha1.EnforcementReject},
		},
	}

	BeforeAll(func() {
		if os.Getenv("RETRYCAP_BENCH") != "admission" {
			Skip("set RETRYCAP_BENCH=admission to run the admission benchmark")
		}
		for i := 0; i < 10; i++ {
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i), Labels: map[string]string{label: "yes"}}})).To(Succeed())
		}
		start := time.Now()
		jobs := make(chan int)
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for i := range jobs {
					ups := fmt.Sprintf("svc-%d.%s=2", i+1, ns(i+1))
					if i%5 == 4 {
						ups = "auth.bench-c0=2"
					}
					Expect(k8sClient.Create(ctx, gateDeployment(ns(i), fmt.Sprintf("svc-%d", i), ups, nil))).To(Succeed())
				}
			}()
		}
		for i := 0; i < workloads-1; i++ {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		Expect(k8sClient.Create(ctx, gateDeployment(ns(0), "auth", "", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, crp)).To(Succeed())
		Eventually(func() int {
			n := 0
			for i := 0; i < 10; i++ {
				n += gateWebhooks.Gate.index.Len(ns(i))
			}
			return n
		}, 2*time.Minute).Should(Equal(workloads))
		Eventually(func() error {
			return mgrClient.Get(ctx, client.ObjectKeyFromObject(crp), &v1alpha1.ClusterRetryPolicy{})
		}, cacheWait).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "created %d Deployments in 10 namespaces in %s\n", workloads, time.Since(start).Round(time.Millisecond))
	})
	AfterAll(func() {
		if os.Getenv("RETRYCAP_BENCH") == "admission" {
			Expect(k8sClient.Delete(ctx, crp)).To(Succeed())
		}
	})

	It("handler decision time", func() {
		// A create in the middle of a chain: svc-0 -x2-> svc-1 -x2-> svc-2 -x9-> svc-3 -x2-> svc-4 -x2-> auth, across five namespaces.
		over := gateDeployment(ns(2), "svc-2", "svc-3.bench-c3=9", nil)
		benchMeasure(ctx, "cluster: create over the cap (Reject, message + plan)", benchRequest(admissionv1.Create, over, nil), false, samples)
		within := gateDeployment(ns(2), "svc-2", "svc-3.bench-c3=1", nil)
		benchMeasure(ctx, "cluster: create within the cap", benchRequest(admissionv1.Create, within, nil), true, samples)
		stored := gateDeployment(ns(2), "svc-2", "svc-3.bench-c3=2", nil)
		bump := stored.DeepCopy()
		bump.Spec.Template.Spec.Containers[0].Image = "retrycap/lab-app:v2"
		benchMeasure(ctx, "cluster: update that raises nothing (image bump)", benchRequest(admissionv1.Update, bump, stored), true, samples)
		// Worst case: every one of the 5000 workloads, in ten namespaces, reaches auth.
		auth := gateDeployment(ns(0), "auth", "db=3", nil)
		resp := gateWebhooks.Gate.Handle(ctx, benchRequest(admissionv1.Create, auth, nil))
		Expect(resp.Result.Message).To(HaveSuffix("= 96 > cap 64; auth.bench-c0 may keep db.bench-c0=2"))
		benchMeasure(ctx, "cluster: create of the service all 5000 reach (worst case)", benchRequest(admissionv1.Create, auth, nil), false, samples)
		authStored := gateDeployment(ns(0), "auth", "", nil)
		authBump := authStored.DeepCopy()
		authBump.Spec.Template.Spec.Containers[0].Image = "retrycap/lab-app:v2"
		benchMeasure(ctx, "cluster: image bump of the service all 5000 reach", benchRequest(admissionv1.Update, authBump, authStored), true, samples)
	})
})
