package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// inj19: LimitRanges the injector did not see as the API server's LimitRanger does.
var _ = Describe("inj19: pod injector, LimitRange defaults and a LimitRange the cache has not seen", Ordered, func() {
	ctx := context.Background()
	storage := func(v string) corev1.ResourceList {
		return corev1.ResourceList{"ephemeral-storage": resource.MustParse(v)}
	}
	policyIn := func(ns string) {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
	}
	// The namespace's defaults give every container 1Gi of ephemeral-storage (512Mi requested).
	limitRange := func(ns, podMax string) *corev1.LimitRange {
		return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Default: storage("1Gi"), DefaultRequest: storage("512Mi")},
			{Type: corev1.LimitTypePod, Max: storage(podMax)}}}}
	}
	app := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
	}
	skipOf := func(ns string) string {
		return "LimitRangeConflict: LimitRange " + ns + "/storage spec.limits[1] (type Pod) max ephemeral-storage is 1Gi, and the pod's ephemeral-storage limit is 2Gi with the proxy (whose limit is 1Gi), 1Gi without it " +
			"(the proxy's ephemeral-storage limit is the default of LimitRange " + ns + "/storage spec.limits[0], which the API server gives it; no annotation of retrycap's sets it): the API server would refuse the pod"
	}

	// A Pod item's max ephemeral-storage that the app's defaulted limit reaches: the proxy, given
	// the same default by the reinvoked LimitRanger, doubled the pod's sum, and every injected pod
	// was refused (on main: injected). Now skipped, naming the item and the default.
	It("skips a pod whose proxy the LimitRanger's defaults would push over a Pod max", func() {
		const ns = "inj19-lr-defaults"
		policyIn(ns)
		lr := limitRange(ns, "1Gi")
		Expect(k8sClient.Create(ctx, lr)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(lr), &corev1.LimitRange{})).To(Succeed())
		}, cacheWait).Should(Succeed())

		// The pod as main injected it: the app as the LimitRanger defaults it before the
		// webhooks, the proxy judged on CPU and memory only. The API server refuses it.
		asMain := app(ns, "as-main-injected")
		asMain.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: storage("1Gi"), Requests: storage("512Mi")}
		d := inject.Decide(inject.Config{ProxyImage: suiteProxyImage}, inject.Input{Pod: asMain, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"},
			Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
		Expect(d.Injected).To(BeTrue(), "%v", d.Skip)
		Expect(k8sClient.Create(ctx, d.Pod)).To(MatchError(ContainSubstring("maximum ephemeral-storage usage per Pod is 1Gi, but limit is 2Gi")))

		// Through the injector: stored, skipped with the reason, the app as it was.
		pod := app(ns, "app")
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		Expect(stored.Spec.InitContainers).To(BeEmpty())
		Expect(stored.Annotations).To(HaveKeyWithValue(inject.SkippedAnnotation, skipOf(ns)))
		Expect(stored.Spec.Containers[0].Resources.Limits.StorageEphemeral().String()).To(Equal("1Gi"))
	})

	It("injects where the Pod max has room for the proxy's default, and the API server gives it", func() {
		const ns = "inj19-lr-room"
		policyIn(ns)
		lr := limitRange(ns, "2Gi")
		Expect(k8sClient.Create(ctx, lr)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(lr), &corev1.LimitRange{})).To(Succeed())
		}, cacheWait).Should(Succeed())
		pod := app(ns, "app")
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		Expect(stored.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/all"))
		Expect(stored.Spec.InitContainers).To(HaveLen(1))
		// The proxy sets no ephemeral-storage; the LimitRanger, reinvoked, gave it the default.
		Expect(stored.Spec.InitContainers[0].Resources.Limits.StorageEphemeral().String()).To(Equal("1Gi"))
		Expect(stored.Spec.InitContainers[0].Resources.Requests.StorageEphemeral().String()).To(Equal("512Mi"))
	})

	// A LimitRange created just before the pod, not yet in the injector's cache. The lag is made
	// certain with a real informer cache of the same API server, synced and then stopped before the
	// LimitRange is created, as the LimitRange handler's would be a moment behind. On main the
	// injector read the cache only: the pod was injected (and the API server refused it). Now a
	// namespace the cache has no LimitRange for is read from the API server, once per
	// limitRangeLiveTTL.
	It("reads through to the API server when the cache has no LimitRange for the namespace", func() {
		const ns = "inj19-lr-lag"
		policyIn(ns)
		stale, err := cache.New(cp.Config, cache.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = stale.Start(cctx)
		}()
		_, err = stale.GetInformer(cctx, &corev1.LimitRange{})
		Expect(err).NotTo(HaveOccurred())
		Expect(stale.WaitForCacheSync(cctx)).To(BeTrue())
		stop()
		Eventually(done).Should(BeClosed())

		lr := limitRange(ns, "1Gi")
		Expect(k8sClient.Create(ctx, lr)).To(Succeed())
		var seen corev1.LimitRangeList
		Expect(stale.List(ctx, &seen, client.InNamespace(ns))).To(Succeed())
		Expect(seen.Items).To(BeEmpty(), "the stopped cache saw the LimitRange: the lag is not made")

		handle := func(h *PodInjector) map[string]string {
			// As the API server sends it: the LimitRanger's defaults given before the webhooks.
			pod := app(ns, "app")
			pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: storage("1Gi"), Requests: storage("512Mi")}
			raw, err := json.Marshal(pod)
			Expect(err).NotTo(HaveOccurred())
			resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "inj19", Operation: admissionv1.Create,
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: ns, DryRun: ptrTrue(), Object: runtime.RawExtension{Raw: raw}}})
			Expect(resp.Allowed).To(BeTrue(), "%v", resp.Result)
			p, err := json.Marshal(resp.Patches)
			Expect(err).NotTo(HaveOccurred())
			decoded, err := jsonpatch.DecodePatch(p)
			Expect(err).NotTo(HaveOccurred())
			applied, err := decoded.Apply(raw)
			Expect(err).NotTo(HaveOccurred())
			var out corev1.Pod
			Expect(json.Unmarshal(applied, &out)).To(Succeed())
			return out.Annotations
		}
		// The cache only (main's reading): injected.
		cacheOnly := *podInjector
		cacheOnly.limitRanges = newLimitRangeLookup(stale, nil, podInjector.log)
		Expect(handle(&cacheOnly)).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/all"))

		// Read through: skipped, naming the LimitRange; a second pod within the TTL makes no
		// second list, and one after it does.
		lagging := *podInjector
		lookup := newLimitRangeLookup(stale, k8sClient, podInjector.log)
		now := time.Now()
		lookup.now = func() time.Time { return now }
		lagging.limitRanges = lookup
		Expect(handle(&lagging)).To(HaveKeyWithValue(inject.SkippedAnnotation, skipOf(ns)))
		Expect(handle(&lagging)).To(HaveKeyWithValue(inject.SkippedAnnotation, skipOf(ns)))
		Expect(lookup.lists).To(Equal(1))
		now = now.Add(limitRangeLiveTTL)
		Expect(handle(&lagging)).To(HaveKeyWithValue(inject.SkippedAnnotation, skipOf(ns)))
		Expect(lookup.lists).To(Equal(2))
	})

	// adv20: simultaneous misses of a namespace share one live list (singleflight), which ran on
	// the first caller's context: the first admission request cancelled (its client gone), the
	// list failed for every request joined to it, and they judged the pod without the LimitRange
	// (injected, so the API server refused the pod). The list is held in a real API client's
	// transport until both requests wait on it; the first is then cancelled. Now the list runs on
	// a context of its own, each request waits on its own context, and the second request sees
	// the LimitRange from the one list made.
	It("a cancelled first request does not fail the live list the others wait on", func() {
		const ns = "adv20-lr-cancel"
		policyIn(ns)
		stale, err := cache.New(cp.Config, cache.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = stale.Start(cctx)
		}()
		_, err = stale.GetInformer(cctx, &corev1.LimitRange{})
		Expect(err).NotTo(HaveOccurred())
		Expect(stale.WaitForCacheSync(cctx)).To(BeTrue())
		stop()
		Eventually(done).Should(BeClosed())
		Expect(k8sClient.Create(ctx, limitRange(ns, "1Gi"))).To(Succeed())

		// The live reader: a real client of the API server whose LimitRange lists wait for
		// release (or their request's end).
		release := make(chan struct{})
		var held atomic.Int32
		cfg := rest.CopyConfig(cp.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/limitranges") {
					held.Add(1)
					select {
					case <-release:
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
				return rt.RoundTrip(req)
			})
		})
		live, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		lookup := newLimitRangeLookup(stale, live, podInjector.log)
		inj := *podInjector
		inj.limitRanges = lookup

		handle := func(hctx context.Context, uid string) admission.Response {
			pod := app(ns, "app-"+uid)
			pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: storage("1Gi"), Requests: storage("512Mi")}
			raw, err := json.Marshal(pod)
			if err != nil {
				return admission.Errored(500, err)
			}
			return inj.Handle(hctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID(uid), Operation: admissionv1.Create,
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: ns, DryRun: ptrTrue(), Object: runtime.RawExtension{Raw: raw}}})
		}
		waiting := func() int {
			lookup.mu.Lock()
			defer lookup.mu.Unlock()
			return lookup.waiting
		}
		firstCtx, cancelFirst := context.WithCancel(ctx)
		defer cancelFirst()
		first, second := make(chan admission.Response, 1), make(chan admission.Response, 1)
		go func() { first <- handle(firstCtx, "first") }()
		Eventually(held.Load).Should(Equal(int32(1)), "the first request's live list reached the transport")
		go func() { second <- handle(ctx, "second") }()
		Eventually(waiting).Should(Equal(2), "the second request asked for the live list")
		cancelFirst()
		Eventually(first).Should(Receive())
		close(release)
		var resp admission.Response
		Eventually(second).Should(Receive(&resp))
		Expect(resp.Allowed).To(BeTrue(), "%v", resp.Result)
		p, err := json.Marshal(resp.Patches)
		Expect(err).NotTo(HaveOccurred())
		decoded, err := jsonpatch.DecodePatch(p)
		Expect(err).NotTo(HaveOccurred())
		pod := app(ns, "app-second")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: storage("1Gi"), Requests: storage("512Mi")}
		raw, err := json.Marshal(pod)
		Expect(err).NotTo(HaveOccurred())
		applied, err := decoded.Apply(raw)
		Expect(err).NotTo(HaveOccurred())
		var out corev1.Pod
		Expect(json.Unmarshal(applied, &out)).To(Succeed())
		Expect(out.Annotations).To(HaveKeyWithValue(inject.SkippedAnnotation, skipOf(ns)))
		Expect(held.Load()).To(Equal(int32(1)), "one live list for both requests")
		Expect(lookup.lists).To(Equal(1))
	})
})

func ptrTrue() *bool { b := true; return &b }

// roundTripFunc is an http.RoundTripper of a function (a transport wrapper of the tests).
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
