// Command manager runs the retrycap controller and admission webhooks.
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/retrycap/retrycap/internal/operator"
)

func main() {
	var o operator.Options
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address that serves /metrics; \"0\" disables it")
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address that serves /healthz and /readyz")
	flag.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election lease (default: the manager's own)")
	flag.BoolVar(&o.Webhooks, "enable-webhooks", true, "serve the admission webhooks (turn off for a local run without TLS)")
	flag.IntVar(&o.WebhookPort, "webhook-port", 9443, "port the webhook server listens on")
	flag.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key for the webhook server")
	flag.StringVar(&o.ProxyImage, "proxy-image", operator.DefaultProxyImage, "image of the retrycap-proxy sidecar the injector adds")
	flag.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the manager's own namespace, never acted on by the webhooks (default: $POD_NAMESPACE)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	mgr, err := operator.NewManager(ctrl.GetConfigOrDie(), o)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	log.Info("starting the manager", "webhooks", o.Webhooks, "proxyImage", o.ProxyImage)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "the manager stopped with an error")
		os.Exit(1)
	}
}
