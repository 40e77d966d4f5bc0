package operator

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/internal/controller"
	"github.com/retrycap/retrycap/internal/webhook"
)

// setupComponents registers the controllers and webhooks.
func setupComponents(mgr ctrl.Manager, o Options) error {
	if err := (&controller.RetryPolicyReconciler{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering the RetryPolicy controller: %w", err)
	}
	if o.Webhooks {
		wh, err := webhook.SetupWithManager(mgr, webhook.Options{ManagerNamespace: o.Namespace})
		if err != nil {
			return fmt.Errorf("registering the workload gate and the RetryPolicy validator: %w", err)
		}
		if _, err := webhook.SetupPodInjectorWithManager(mgr, webhook.PodInjectorOptions{ProxyImage: o.ProxyImage, ManagerNamespace: o.Namespace, Index: wh.Index}); err != nil {
			return fmt.Errorf("registering the pod injector: %w", err)
		}
	}
	return nil
}
