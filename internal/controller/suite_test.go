package controller

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/kubeobj"
	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
)

// The suite runs the reconciler in a real manager against a real kube-apiserver and etcd. It
// registers its own RetryPolicyReconciler (not operator.NewManager's), on a counting client, so
// the tests can read the reconciler's reconciles and write counts, and a
// ClusterRetryPolicyReconciler over the same index; no webhooks run, so this suite does not depend on them.
var (
	cp         *controlplane.ControlPlane
	k8sClient  client.Client
	mgrClient  client.Client // the manager's cached client: what the reconciler sees
	reconciler *RetryPolicyReconciler
	counted    *countingClient // the reconciler's client, counting per policy
	stopMgr    context.CancelFunc
	// metricsAddr is where the manager serves /metrics.
	metricsAddr string
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	// Gomega's default of 1 s is too short for a reconcile on a loaded 2-core machine (it made a
	// spec fail with the right state reached 0.4 s later); a spec still fails at once on a wrong
	// final state through its Expect, and polls every 50 ms.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "RetryPolicy controller")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	cp, err = controlplane.Start(controlplane.Options{})
	Expect(err).NotTo(HaveOccurred())

	scheme := retrycapscheme.New()
	k8sClient, err = client.New(cp.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// Serve /metrics on a free loopback port, so the tests scrape it like Prometheus does.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	metricsAddr = l.Addr().String()
	Expect(l.Close()).To(Succeed())
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  kubeobj.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	counted = newCountingClient(mgr.GetClient())
	reconciler = &RetryPolicyReconciler{Client: counted, Index: fedIndex(mgr)}
	Expect(reconciler.SetupWithManager(mgr)).To(Succeed())
	// The cluster policies' reconciler reads the same index, as in the operator.
	Expect((&ClusterRetryPolicyReconciler{Index: reconciler.Index}).SetupWithManager(mgr)).To(Succeed())
	mgrClient = mgr.GetClient()

	var ctx context.Context
	ctx, stopMgr = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
	}
	if cp != nil {
		Expect(cp.Stop()).To(Succeed())
	}
})

// sampleObjects reads a file of config/samples, moved to namespace ns (the Namespace object
// renamed too), so each test gets its own copy of a scenario.
func sampleObjects(file, ns string) []*unstructured.Unstructured {
	data, err := os.ReadFile(filepath.Join(cp.RepoRoot, "config", "samples", file))
	Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			Expect(err.Error()).To(Equal("EOF"))
			break
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "Namespace" {
			u.SetName(ns)
		} else {
			u.SetNamespace(ns)
		}
		out = append(out, u)
	}
	return out
}
