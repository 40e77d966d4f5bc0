package cli

import (
	"context"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/controlplane"
)

// startControlPlane starts a real API server and etcd for a test that plays the user with
// kubectl, stopped at the test's end, and a context that bounds the test's kubectl calls.
func startControlPlane(t *testing.T, bound time.Duration) (*controlplane.ControlPlane, context.Context) {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return cp, ctx
}
