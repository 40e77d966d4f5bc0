package operator

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/kubeobj"
	"github.com/retrycap/retrycap/internal/meshwatch"
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
	// PprofAddr serves net/http/pprof ("" or "0": off).
	PprofAddr string
	// LeaderElection makes only one replica reconcile (write status); every replica serves the
	// webhooks from its own warm cache.
	LeaderElection bool
	// LeaderElectionNamespace holds the lease; empty means Namespace (the manager's own), which
	// also makes --leader-elect work out of cluster.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod are the lease timings (zero: the defaults
	// below). A follower takes over a killed leader within LeaseDuration (+ RetryPeriod); a
	// leader shut down cleanly releases the lease, and a follower takes over within RetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Webhooks serves the admission webhooks; off for a local `make run` without TLS.
	Webhooks       bool
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// Draining, when set, says the replica was told to stop and is in its shutdown delay
	// (cmd/manager's --shutdown-delay): its webhook answers then close their connections
	// (drain.go).
	Draining func() bool
	// ProxyImage is the sidecar image the injector adds.
	ProxyImage string
	// Namespace is the manager's own namespace; the webhooks never act on it.
	Namespace string
	// MeshAPIs is --mesh-apis ("auto", "none", or resource.group names); MeshRecheck how often
	// the served mesh APIs are discovered again; IstioDefaultRetries is --istio-default-retries
	// (nil: MeshConfig, else Istio's 2).
	MeshAPIs            string
	MeshRecheck         time.Duration
	IstioDefaultRetries *int64
	// Prometheus is --prometheus-url and its companions (observed.go); zero: off.
	Prometheus Prometheus
	// SeveralInProcess lets more than one manager be built in one process (tests that start an
	// operator per case): controller-runtime refuses a second controller of a name per process,
	// since two would report the same metrics. A deployed manager builds one, so this stays off.
	SeveralInProcess bool
}

// Lease timings by default: those of controller-runtime and kube-controller-manager.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// LeaderElectionID names the lease.
const LeaderElectionID = "retrycap-manager.retrycap.dev"

// NewManager builds a manager with every retrycap controller and (if enabled) webhook registered.
func NewManager(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.ProxyImage == "" {
		o.ProxyImage = DefaultProxyImage
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = o.Namespace
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	lease, renew, retry := o.leaseTimings()
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.New(),
		Cache:                   kubeobj.CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// A replica that stops (a rollout, a drain, SIGTERM) hands the lease over at once instead
		// of making the next leader wait out the lease. Safe: the manager stops its
		// leader-elected runnables (the controller) before it releases.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(o.SeveralInProcess)},
	}
	if o.Webhooks {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir})
		if o.Draining != nil {
			mgrOpts.WebhookServer = drainingServer{Server: mgrOpts.WebhookServer, draining: o.Draining}
		}
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

// Validate reports options no retry can fix (NewManager's other errors may pass once the API
// server answers).
func (o Options) Validate() error {
	if _, err := meshwatch.ParseSelection(o.MeshAPIs); err != nil {
		return err
	}
	if o.IstioDefaultRetries != nil && *o.IstioDefaultRetries < 0 {
		return fmt.Errorf("--istio-default-retries %d: must be 0 or more", *o.IstioDefaultRetries)
	}
	if err := o.Prometheus.validate(); err != nil {
		return err
	}
	// controller-runtime would take any int and fail at the listen, after the caches synced,
	// with "invalid port" (0 picks a random port the Service cannot name).
	if o.Webhooks && (o.WebhookPort < 1 || o.WebhookPort > 65535) {
		return fmt.Errorf("--webhook-port %d: want a port 1..65535", o.WebhookPort)
	}
	// A negative timing was its default (orDefault), without a word; a zero given on the
	// command line is refused by cmd/manager, which alone knows it was given.
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"leader-elect-lease-duration", o.LeaseDuration}, {"leader-elect-renew-deadline", o.RenewDeadline}, {"leader-elect-retry-period", o.RetryPeriod}} {
		if d.v < 0 {
			return fmt.Errorf("--%s %s: must be positive", d.flag, d.v)
		}
	}
	// A negative one was the default; under a second is refused by cmd/manager (tests recheck
	// faster).
	if o.MeshRecheck < 0 {
		return fmt.Errorf("--mesh-recheck-interval %s: want at least 1s", o.MeshRecheck)
	}
	for _, n := range []struct{ flag, v string }{{"namespace", o.Namespace}, {"leader-election-namespace", o.LeaderElectionNamespace}} {
		if n.v == "" {
			continue // the defaults: $POD_NAMESPACE, --namespace
		}
		if reason := annotations.ValidateLabel(n.v); reason != "" {
			return fmt.Errorf("--%s %q: not a namespace name (a DNS-1123 label): %s", n.flag, n.v, reason)
		}
	}
	// controller-runtime listens on these only after the caches synced: a bad one ended the
	// manager then (exit 1), not at start.
	for _, a := range []struct{ flag, v string }{{"metrics-bind-address", o.MetricsAddr}, {"health-probe-bind-address", o.ProbeAddr}, {"pprof-bind-address", o.PprofAddr}} {
		if a.v == "" || a.v == "0" {
			continue
		}
		_, port, err := net.SplitHostPort(a.v)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 0 || p > 65535 {
			return fmt.Errorf("--%s %q: want HOST:PORT, :PORT or 0 (off)", a.flag, a.v)
		}
	}
	if strings.ContainsFunc(o.ProxyImage, unicode.IsSpace) {
		return fmt.Errorf("--proxy-image %q: want an image reference (no spaces)", o.ProxyImage)
	}
	if o.Webhooks && o.WebhookCertDir != "" {
		const why = "(the webhook server reads tls.crt and tls.key there; --enable-webhooks=false runs without them)"
		if st, err := os.Stat(o.WebhookCertDir); err != nil {
			return fmt.Errorf("--webhook-cert-dir %q: %v %s", o.WebhookCertDir, err, why)
		} else if !st.IsDir() {
			return fmt.Errorf("--webhook-cert-dir %q: not a directory %s", o.WebhookCertDir, why)
		}
	}
	lease, renew, retry := o.leaseTimings()
	if o.LeaderElection && (renew >= lease || retry >= renew) {
		return fmt.Errorf("leader election: want retry period (%s) < renew deadline (%s) < lease duration (%s)", retry, renew, lease)
	}
	return nil
}

func (o Options) leaseTimings() (lease, renew, retry time.Duration) {
	return orDefault(o.LeaseDuration, DefaultLeaseDuration), orDefault(o.RenewDeadline, DefaultRenewDeadline), orDefault(o.RetryPeriod, DefaultRetryPeriod)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
