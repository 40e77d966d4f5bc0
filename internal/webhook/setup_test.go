package webhook

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
)

// The webhooks set up without the shared workload index is a construction error naming the
// option, not a second index fed silently from the cache.
var _ = Describe("setup without an Index", func() {
	It("fails for the gate and for the pod injector", func() {
		mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: retrycapscheme.New(),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
		Expect(err).NotTo(HaveOccurred())
		_, err = SetupWithManager(mgr, Options{})
		Expect(err).To(MatchError("registering the workload gate: Options.Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)"))
		_, err = SetupPodInjectorWithManager(mgr, PodInjectorOptions{ProxyImage: suiteProxyImage})
		Expect(err).To(MatchError("registering the pod injector: PodInjectorOptions.Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)"))
	})
})
