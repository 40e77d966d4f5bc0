package operator

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/internal/controller"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/kubeobj"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/webhook"
)

// setupComponents registers the controllers and webhooks, over one workload index fed from the
// manager's (trimmed) informers: the controller, the gate and the injector read the same objects
// once parsed.
func setupComponents(mgr ctrl.Manager, o Options) error {
	idx := index.New()
	if err := kubeobj.FeedIndex(context.Background(), mgr.GetCache(), idx, mgr.GetAPIReader()); err != nil {
		return fmt.Errorf("feeding the workload index: %w", err)
	}
	mw, err := newMeshWatcher(mgr, o)
	if err != nil {
		return err
	}
	obs, err := newObserver(mgr, o.Prometheus)
	if err != nil {
		return err
	}
	if err := (&controller.RetryPolicyReconciler{Index: idx, Mesh: mw, Observed: obs}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering the RetryPolicy controller: %w", err)
	}
	if err := (&controller.ClusterRetryPolicyReconciler{Index: idx, Mesh: mw, Observed: obs}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering the ClusterRetryPolicy controller: %w", err)
	}
	if o.Webhooks {
		if _, err := webhook.SetupWithManager(mgr, webhook.Options{ManagerNamespace: o.Namespace, Index: idx, Mesh: mw}); err != nil {
			return fmt.Errorf("registering the workload gate and the RetryPolicy validator: %w", err)
		}
		if _, err := webhook.SetupPodInjectorWithManager(mgr, webhook.PodInjectorOptions{ProxyImage: o.ProxyImage, ManagerNamespace: o.Namespace, Index: idx}); err != nil {
			return fmt.Errorf("registering the pod injector: %w", err)
		}
	}
	return nil
}

// newMeshWatcher adds the mesh watcher (internal/meshwatch) to the manager; with --mesh-apis=none
// it runs too (no informer, no Set) so that the policies say MeshLayers False.
func newMeshWatcher(mgr ctrl.Manager, o Options) (*meshwatch.Watcher, error) {
	sel, err := meshwatch.ParseSelection(o.MeshAPIs)
	if err != nil {
		return nil, err
	}
	mw, err := meshwatch.New(mgr.GetConfig(), meshwatch.Options{Selection: sel, Recheck: o.MeshRecheck,
		Mesh: mesh.Options{IstioDefaultRetries: o.IstioDefaultRetries}, Log: mgr.GetLogger().WithName("mesh")})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(mw); err != nil {
		return nil, fmt.Errorf("adding the mesh watcher: %w", err)
	}
	return mw, nil
}
