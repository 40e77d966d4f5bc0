package operator

import (
	"fmt"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/retrycap/retrycap/internal/cluster"
	"github.com/retrycap/retrycap/internal/scheme"
)

// DefaultProxyImage is the sidecar image injected when --proxy-image is not set.
const DefaultProxyImage = "retrycap/retrycap-proxy:v0.1.0"

// Options configures the manager. The zero value is not useful; cmd/manager fills it from flags.
type Options struct {
	// MetricsAddr serves /metrics ("0" disables it).
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz ("0" disables it).
	ProbeAddr string
	// LeaderElection makes only one replica reconcile and serve decisions from a warm cache.
	LeaderElection          bool
	LeaderElectionNamespace string
	// Webhooks serves the admission webhooks; off for a local `make run` without TLS.
	Webhooks       bool
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// ProxyImage is the sidecar image the injector adds.
	ProxyImage string
	// Namespace is the manager's own namespace; the webhooks never act on it.
	Namespace string
}

// NewManager builds a manager with every retrycap controller and (if enabled) webhook registered.
func NewManager(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.ProxyImage == "" {
		o.ProxyImage = DefaultProxyImage
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "retrycap-manager.retrycap.dev",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Services cut down to what the graph reads (cluster.ServiceTransform).
		Cache: cache.Options{ByObject: cluster.CacheByObject()},
	}
	if o.Webhooks {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir})
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the health check: %w", err)
	}
	ready := healthz.Ping
	if o.Webhooks {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("ready", ready); err != nil {
		return nil, fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := setupComponents(mgr, o); err != nil {
		return nil, err
	}
	return mgr, nil
}
