package operator

import ctrl "sigs.k8s.io/controller-runtime"

// setupComponents registers the controllers and webhooks.
func setupComponents(mgr ctrl.Manager, o Options) error {
	_ = mgr
	_ = o
	return nil
}
