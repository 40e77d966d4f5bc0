package e2e

// The shared suite runs retrycap end to end: ONE real kube-apiserver + etcd for the whole package,
// with the CRDs and the webhook configurations installed, and the manager exactly as
// cmd/manager builds it (operator.NewManager: the controller and every webhook) serving them.
// Users' tools talk to it: the built kubectl (Env.CP.RunKubectl, Kubectl) and the retrycap CLI.
//
// Adding tests: put them in their own file of package e2e and use the helpers below. Give each
// test its own namespace (or the samples' own, applied once by whichever test needs them:
// ApplySample is idempotent), so files do not depend on each other's order.

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/operator"
	"github.com/retrycap/retrycap/internal/scheme"
)

// ManagerNamespace is the manager's own namespace in the suite, as in config/.
const ManagerNamespace = "retrycap-system"

// Env is the suite's shared environment.
var Env struct {
	// CP is the control plane: CP.Kubeconfig, CP.Kubectl, CP.RunKubectl, CP.RepoRoot.
	CP *controlplane.ControlPlane
	// Client is a direct (uncached) admin client.
	Client client.Client
	// Manager is the running manager.
	Manager ctrl.Manager
	// Dir is a scratch directory for the whole suite (built binaries, rendered files), removed
	// after the suite; give your files names that will not collide with other tests'.
	Dir string
}

var stopManager context.CancelFunc

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	// Gomega's default of 1 s is too short for a reconcile on a loaded 2-core machine (it made a
	// spec fail with the right state reached 0.4 s later); a spec still fails at once on a wrong
	// final state through its Expect, and polls every 50 ms.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "retrycap end to end")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	Env.Dir, err = os.MkdirTemp("", "retrycap-e2e-")
	Expect(err).NotTo(HaveOccurred())
	cp, err := controlplane.Start(controlplane.Options{Webhooks: true})
	Expect(err).NotTo(HaveOccurred())
	Env.CP = cp
	Env.Client, err = client.New(cp.Config, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())

	serving := cp.WebhookServing()
	mgr, err := operator.NewManager(cp.Config, operator.Options{
		MetricsAddr: "0", ProbeAddr: "0",
		Webhooks: true, WebhookHost: serving.Host, WebhookPort: serving.Port, WebhookCertDir: serving.CertDir,
		Namespace: ManagerNamespace,
	})
	Expect(err).NotTo(HaveOccurred())
	Env.Manager = mgr
	var ctx context.Context
	ctx, stopManager = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	// The API server calls the webhooks as soon as a test creates something: wait until they
	// answer TLS.
	addr := net.JoinHostPort(serving.Host, strconv.Itoa(serving.Port))
	Eventually(func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe of our own loopback server
		if err != nil {
			return err
		}
		return conn.Close()
	}, time.Minute).Should(Succeed(), "the webhook server at %s", addr)
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	if Env.CP != nil {
		Expect(Env.CP.Stop()).To(Succeed())
	}
	if Env.Dir != "" {
		Expect(os.RemoveAll(Env.Dir)).To(Succeed())
	}
})

// Kubectl runs the built kubectl against the suite's control plane and fails the test on a
// non-zero exit, with its stderr.
func Kubectl(ctx context.Context, args ...string) string {
	out, errOut, err := Env.CP.RunKubectl(ctx, "", args...)
	Expect(err).NotTo(HaveOccurred(), "stderr: %s", errOut)
	return out
}

// ApplySample applies a file of config/samples (e.g. "incident18.yaml") with `kubectl apply`,
// as a user would.
func ApplySample(ctx context.Context, file string) {
	Kubectl(ctx, "apply", "-f", filepath.Join(Env.CP.RepoRoot, "config", "samples", file))
}

// SamplePath is the path of a file of config/samples.
func SamplePath(file string) string {
	return filepath.Join(Env.CP.RepoRoot, "config", "samples", file)
}
