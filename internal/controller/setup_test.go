package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
)

// A reconciler set up without the shared workload index is a construction error naming the
// field, not a second index fed silently from the cache.
var _ = Describe("SetupWithManager without an Index", func() {
	It("fails for both reconcilers", func() {
		mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: retrycapscheme.New(),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
		Expect(err).NotTo(HaveOccurred())
		Expect((&RetryPolicyReconciler{}).SetupWithManager(mgr)).To(MatchError(
			"setting up the " + ControllerName + " controller: Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)"))
		Expect((&ClusterRetryPolicyReconciler{}).SetupWithManager(mgr)).To(MatchError(
			"setting up the " + ClusterControllerName + " controller: Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)"))
	})
})
