package operator

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/controllers"
	"github.com/retrycap/retrycap/webhooks"
)

// setupComponents registers the controllers and webhooks.
func setupComponents(mgr ctrl.Manager, o Options) error {
	if err := (&controllers.RetryPolicyReconciler{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering the RetryPolicy controller: %w", err)
	}
	if o.Webhooks {
		if _, err := webhooks.SetupWithManager(mgr, webhooks.Options{ManagerNamespace: o.Namespace}); err != nil {
			return fmt.Errorf("registering the workload gate and the RetryPolicy validator: %w", err)
		}
		if _, err := webhooks.SetupPodInjectorWithManager(mgr, webhooks.PodInjectorOptions{ProxyImage: o.ProxyImage, ManagerNamespace: o.Namespace}); err != nil {
			return fmt.Errorf("registering the pod injector: %w", err)
		}
	}
	_ = o
	return nil
}
