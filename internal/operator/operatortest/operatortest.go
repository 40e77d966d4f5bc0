package operatortest

import (
	"context"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/operator"
	"github.com/retrycap/retrycap/internal/scheme"
)

// Operator is a running manager with its webhooks, and a client of the API server it runs
// against.
type Operator struct {
	CP     *controlplane.ControlPlane
	Client client.Client
	// Ctx is cancelled when the test ends (the manager stops first, then the control plane).
	Ctx context.Context
}

// Start starts a control plane with webhooks and the extra CRDs in crdPaths, and the operator
// against it with its mesh re-check every 200 ms; both stop when t ends, and the manager must
// stop cleanly.
func Start(t *testing.T, crdPaths ...string) *Operator {
	t.Helper()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	cp, err := controlplane.Start(controlplane.Options{Webhooks: true, CRDPaths: crdPaths, ProgressTo: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	serving := cp.WebhookServing()
	mgr, err := operator.NewManager(cp.Config, operator.Options{
		MetricsAddr: "0", ProbeAddr: "0", Webhooks: true,
		WebhookHost: serving.Host, WebhookPort: serving.Port, WebhookCertDir: serving.CertDir,
		Namespace: "retrycap-system", MeshRecheck: 200 * time.Millisecond,
		SeveralInProcess: true, // a test package may start one per test
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &Operator{CP: cp, Client: c, Ctx: ctx}
}
