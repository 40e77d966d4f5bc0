package webhook

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/kubeobj"
	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
)

// The suite serves every webhook of this package from a real manager, called by a real
// kube-apiserver through the shipped config/webhook/manifests.yaml. All webhooks are registered
// (the gate's failurePolicy is Fail: a configuration whose server is missing would refuse pods).
// It builds the manager itself: importing internal/operator from this package is an import cycle.
const (
	suiteManagerNamespace = "retrycap-system"
	suiteProxyImage       = "retrycap/retrycap-proxy:test"
)

var (
	cp        *controlplane.ControlPlane
	k8sClient client.Client // direct: what a user sees
	mgrClient client.Client // the manager's cached client: what the webhooks see
	stopMgr   context.CancelFunc
	// gateWebhooks is the gate and validator the manager serves (the admission benchmark calls
	// the gate's handler directly).
	gateWebhooks *Webhooks
	// podInjector is the injector the manager serves (webred_test.go measures its answer).
	podInjector *PodInjector
)

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	// Gomega's default of 1 s is too short for a reconcile on a loaded 2-core machine (it made a
	// spec fail with the right state reached 0.4 s later); a spec still fails at once on a wrong
	// final state through its Expect, and polls every 50 ms.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "webhooks")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	cp, err = controlplane.Start(controlplane.Options{Webhooks: true})
	Expect(err).NotTo(HaveOccurred())

	scheme := retrycapscheme.New()
	k8sClient, err = client.New(cp.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	serving := cp.WebhookServing()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  kubeobj.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: serving.Host, Port: serving.Port, CertDir: serving.CertDir}),
	})
	Expect(err).NotTo(HaveOccurred())
	// One index fed from the manager's cache, shared by the gate and the injector, as the
	// operator makes it; without one both setups fail (TestSetupWithoutIndex).
	idx := index.New()
	Expect(kubeobj.FeedIndex(context.Background(), mgr.GetCache(), idx)).To(Succeed())
	gateWebhooks, err = SetupWithManager(mgr, Options{ManagerNamespace: suiteManagerNamespace, Index: idx})
	Expect(err).NotTo(HaveOccurred())
	podInjector, err = SetupPodInjectorWithManager(mgr, PodInjectorOptions{ProxyImage: suiteProxyImage, ManagerNamespace: suiteManagerNamespace, Index: gateWebhooks.Index})
	Expect(err).NotTo(HaveOccurred())
	mgrClient = mgr.GetClient()

	var ctx context.Context
	ctx, stopMgr = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	// Ready when the API server can reach the webhook server.
	Eventually(func() error {
		return mgr.GetWebhookServer().StartedChecker()(nil)
	}).Should(Succeed())
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
	}
	if cp != nil {
		Expect(cp.Stop()).To(Succeed())
	}
})
