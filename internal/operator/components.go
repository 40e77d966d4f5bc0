package operator

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/internal/cluster"
	"github.com/retrycap/retrycap/internal/controller"
	"github.com/retrycap/retrycap/internal/gate"
	"github.com/retrycap/retrycap/internal/webhook"
)

// setupComponents registers the controllers and webhooks, over one workload index fed from the
// manager's (trimmed) informers: the controller, the gate and the injector read the same objects
// once parsed.
func setupComponents(mgr ctrl.Manager, o Options) error {
	index := gate.NewIndex()
	if err := cluster.FeedIndex(context.Background(), mgr.GetCache(), index); err != nil {
		return fmt.Errorf("feeding the workload index: %w", err)
	}
	if err := (&controller.RetryPolicyReconciler{Index: index}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering the RetryPolicy controller: %w", err)
	}
	if err := (&controller.ClusterRetryPolicyReconciler{Index: index}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering the ClusterRetryPolicy controller: %w", err)
	}
	if o.Webhooks {
		if _, err := webhook.SetupWithManager(mgr, webhook.Options{ManagerNamespace: o.Namespace, Index: index}); err != nil {
			return fmt.Errorf("registering the workload gate and the RetryPolicy validator: %w", err)
		}
		if _, err := webhook.SetupPodInjectorWithManager(mgr, webhook.PodInjectorOptions{ProxyImage: o.ProxyImage, ManagerNamespace: o.Namespace, Index: index}); err != nil {
			return fmt.Errorf("registering the pod injector: %w", err)
		}
	}
	return nil
}
