// Command manager runs the retrycap controller and admission webhooks.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/operator"
	"github.com/retrycap/retrycap/internal/promquery"
)

func main() {
	var o operator.Options
	var onLeaderLost string
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address that serves /metrics; \"0\" disables it")
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address that serves /healthz and /readyz")
	flag.StringVar(&o.PprofAddr, "pprof-bind-address", "", "address that serves net/http/pprof (heap and CPU profiles); empty: off")
	flag.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader so that only one replica reconciles (every replica serves the webhooks)")
	flag.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election lease (default: --namespace)")
	flag.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", operator.DefaultLeaseDuration, "how long a follower waits after the leader's last renewal before it takes the lease")
	flag.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", operator.DefaultRenewDeadline, "how long the leader tries to renew before it gives up leadership")
	flag.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", operator.DefaultRetryPeriod, "how often candidates try to take, and the leader to renew, the lease")
	flag.StringVar(&onLeaderLost, "on-leader-lost", "restart", "what a leader that could not renew its lease does: \"restart\" (re-executes itself at once, same process id, and runs for the lease again) or \"exit\" (exit code 1; the kubelet restarts it)")
	shutdownDelay := flag.Duration("shutdown-delay", defaultShutdownDelay, "how long a replica told to stop (SIGTERM) keeps serving before it stops, its webhook answers closing their connections, while it leaves the webhook Service's endpoints; the pod's terminationGracePeriodSeconds must exceed it")
	flag.BoolVar(&o.Webhooks, "enable-webhooks", true, "serve the admission webhooks (turn off for a local run without TLS)")
	flag.IntVar(&o.WebhookPort, "webhook-port", 9443, "port the webhook server listens on")
	flag.StringVar(&o.WebhookHost, "webhook-host", "", "address the webhook server listens on (default: every address)")
	flag.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key for the webhook server (rewritten files are picked up without a restart)")
	flag.StringVar(&o.ProxyImage, "proxy-image", operator.DefaultProxyImage, "image of the retrycap-proxy sidecar the injector adds")
	flag.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the manager's own namespace, never acted on by the webhooks, and the lease's (default: $POD_NAMESPACE)")
	flag.StringVar(&o.MeshAPIs, "mesh-apis", meshwatch.ModeAuto, "the mesh APIs whose retry layers the manager reads, when the cluster serves them: \"auto\" (all), \"none\", or a comma-separated list of resource.group (virtualservices.networking.istio.io, serviceentries.networking.istio.io, httproutes.gateway.networking.k8s.io, grpcroutes.gateway.networking.k8s.io, backendtrafficpolicies.gateway.envoyproxy.io, serviceprofiles.linkerd.io, httproutes.policy.linkerd.io, meshes.kuma.io, meshretries.kuma.io, meshexternalservices.kuma.io, meshhttproutes.kuma.io, resiliencies.dapr.io, servicerouters.consul.hashicorp.com, ingresses.networking.k8s.io)")
	flag.DurationVar(&o.MeshRecheck, "mesh-recheck-interval", meshwatch.DefaultRecheck, "how often the manager discovers again which mesh APIs the cluster serves")
	flag.Var(optionalInt64{&o.IstioDefaultRetries}, "istio-default-retries", istioDefaultUsage)
	flag.StringVar(&o.Prometheus.URL, "prometheus-url", "", "Prometheus base URL: the manager queries the proxies' (and Envoy's) per-upstream counters and puts the observed tries and amplification beside the computed ones in the policy status, with the ObservedWithinComputed condition, and the observed graph (Istio, Linkerd, OpenTelemetry service graph, proxies) compared with the declared one in status.graph, with the GraphComplete condition; empty: off")
	flag.DurationVar(&o.Prometheus.Interval, "prometheus-interval", operator.DefaultPrometheusInterval, "how often the manager queries --prometheus-url")
	flag.DurationVar(&o.Prometheus.Window, "prometheus-window", promquery.DefaultWindow, "the range the counters' increase is taken over")
	flag.DurationVar(&o.Prometheus.Timeout, "prometheus-timeout", promquery.DefaultTimeout, "bound of one query (HTTP request and Prometheus' evaluation)")
	flag.Uint64Var(&o.Prometheus.SeriesLimit, "prometheus-series-limit", promquery.DefaultSeriesLimit, "most series one query may return; a query that reaches it is reported as an error")
	o.Prometheus.MaxAnswerBytes = promquery.DefaultMaxAnswerBytes
	flag.Var((*promquery.Size)(&o.Prometheus.MaxAnswerBytes), "prometheus-max-answer-size", "most bytes one answer may hold, a Kubernetes `quantity` (128Mi, 1Gi); an answer over it is refused (not read further) and reported as an error: raise it for a cluster whose answers are larger")
	flag.StringVar(&o.Prometheus.CallerLabel, "prometheus-caller-label", promquery.DefaultCallerLabel, "the label that names the calling service on the proxies' series (the scrape configuration adds it)")
	flag.Var((*labelList)(&o.Prometheus.ReplicaLabels), "prometheus-replica-label", "a label that tells an HA pair's Prometheus replicas apart where the querier does not deduplicate them (Thanos Query's --query.replica-label): each series is read once across it, the largest; repeatable, replaces the defaults prometheus_replica and __replica__")
	flag.StringVar(&o.Prometheus.Cluster, "prometheus-cluster", "", "the value of the cluster label (--prometheus-cluster-label, cluster by default: an external label) of this cluster's series, which the observed amplification and graph read when --prometheus-url holds several clusters'; several without it make the reads fail (the conditions Unknown, naming them)")
	flag.Var(&clusterLabelList{&o.Prometheus.ClusterLabels}, "prometheus-cluster-label", "a label that names a series' cluster where --prometheus-url holds several clusters' (an external label); repeatable, replaces the default cluster")
	flag.StringVar(&o.Prometheus.IstioCluster, "prometheus-istio-cluster", "", "the Istio cluster ID (source_cluster) of this cluster, whose Istio series the observed graph reads when --prometheus-url holds several clusters'; several without it make the graph's read fail (GraphComplete Unknown, naming them)")
	flag.StringVar(&o.Prometheus.Auth.BearerTokenFile, "prometheus-bearer-token-file", "", "file holding a bearer token for --prometheus-url (read on every query: a rotated ServiceAccount token is picked up); exclusive with basic auth")
	flag.StringVar(&o.Prometheus.Auth.Username, "prometheus-username", "", "HTTP basic auth user for --prometheus-url (with --prometheus-password-file)")
	flag.StringVar(&o.Prometheus.Auth.PasswordFile, "prometheus-password-file", "", "file holding the HTTP basic auth password for --prometheus-url (read on every query)")
	flag.StringVar(&o.Prometheus.Auth.CAFile, "prometheus-ca-file", "", "PEM CA bundle that verifies an https --prometheus-url's certificate")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	zeroGiven := givenProblem(flag.CommandLine)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if os.Getenv("GOGC") == "" {
		// The heap is almost all long-lived cache; at the default GOGC=100 the runtime lets it
		// grow to twice that before collecting. 50 holds it to 1.5x for a little more GC work,
		// most of it during the initial sync. GOGC (and GOMEMLIMIT, set from the container's
		// limit in config/) still win.
		debug.SetGCPercent(defaultGCPercent)
	}
	if onLeaderLost != "restart" && onLeaderLost != "exit" {
		log.Error(nil, "--on-leader-lost must be \"restart\" or \"exit\"", "value", onLeaderLost)
		os.Exit(2)
	}

	if zeroGiven != "" {
		log.Error(nil, zeroGiven)
		os.Exit(2)
	}
	// Go's flag package stops at the first argument that is not a flag: "--leader-elect true"
	// left "true" (and every flag after it) unread.
	if flag.NArg() > 0 {
		log.Error(nil, "unexpected argument: the manager takes flags only; a boolean flag's value is written --flag=value", "argument", flag.Arg(0))
		os.Exit(2)
	}
	if *shutdownDelay < 0 {
		log.Error(nil, "--shutdown-delay must not be negative", "value", shutdownDelay.String())
		os.Exit(2)
	}
	if err := o.Validate(); err != nil {
		log.Error(err, "bad flags")
		os.Exit(2)
	}
	var draining atomic.Bool
	o.Draining = draining.Load
	ctx := stopAfterDelay(&draining, *shutdownDelay, func(sig os.Signal) {
		log.Info("told to stop: serving, each webhook answer closing its connection, before stopping", "signal", sig.String(), "delay", shutdownDelay.String())
	})
	cfg := ctrl.GetConfigOrDie()
	// Setting up needs the API server (discovery, for the informers). One that does not answer
	// yet (the manager restarting in place during an outage, or started before it) is waited
	// for, not fatal: exiting would leave a manager outside a cluster down for good.
	var mgr ctrl.Manager
	for {
		var err error
		if mgr, err = operator.NewManager(cfg, o); err == nil {
			break
		}
		log.Error(err, "unable to set up the manager; retrying", "in", setupRetry.String())
		select {
		case <-ctx.Done():
			os.Exit(1)
		case <-time.After(setupRetry):
		}
	}
	log.Info("starting the manager", "webhooks", o.Webhooks, "proxyImage", o.ProxyImage, "leaderElection", o.LeaderElection)
	err := mgr.Start(ctx)
	if err != nil && lostLeadership(ctx, err) && onLeaderLost == "restart" {
		// controller-runtime ends the manager when the leader cannot renew its lease within the
		// renew deadline (an API server outage): another replica may be leading by then, so
		// this one must stop reconciling. Rather than exit and wait for the kubelet (whose
		// back-off grows with each restart, and which a manager run outside a cluster does not
		// have), the process replaces itself with a fresh copy: new caches, a new candidacy.
		log.Error(err, "leadership lost; restarting in place")
		exe, xerr := os.Executable()
		if xerr == nil {
			xerr = syscall.Exec(exe, os.Args, os.Environ())
		}
		log.Error(xerr, "cannot re-execute the manager; exiting")
		os.Exit(1)
	}
	if err != nil {
		log.Error(err, "the manager stopped with an error")
		os.Exit(1)
	}
}

// givenProblem is what is wrong with the first flag given on the command line (fs.Visit) whose
// value operator.Options reads as "the default" (zero, empty), or that the manager cannot act
// on; "" when none. Given, such a value was taken for the default without a word.
func givenProblem(fs *flag.FlagSet) string {
	problem := ""
	fs.Visit(func(f *flag.Flag) {
		if problem != "" {
			return
		}
		v := f.Value.String()
		leave := fmt.Sprintf("(leave the flag out for the default, %s)", f.DefValue)
		if f.DefValue == "" {
			leave = "(leave the flag out to set none)"
		}
		switch f.Name {
		case "prometheus-interval", "prometheus-window", "prometheus-timeout", "prometheus-series-limit",
			"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period", "mesh-recheck-interval":
			if v == "0" || v == "0s" {
				problem = fmt.Sprintf("--%s %s: want more than 0 %s", f.Name, v, leave)
				return
			}
		}
		want := map[string]string{
			"mesh-apis":                "auto, none or a comma-separated list",
			"proxy-image":              "an image reference",
			"prometheus-caller-label":  "a Prometheus label name",
			"prometheus-istio-cluster": "an Istio cluster ID",
			"prometheus-cluster":       "a cluster label's value",
			"webhook-cert-dir":         "a directory",
		}[f.Name]
		if want != "" && strings.TrimSpace(v) == "" {
			problem = fmt.Sprintf("--%s %q: want %s %s", f.Name, v, want, leave)
			return
		}
		// Upper bounds (docs/decisions.md, "Every duration is bounded"): a lease of days is a
		// failover of days, and past 2^31 s the lease's seconds (an int32) wrap; a poll or a
		// recheck interval past a day is never, in practice. Negative values are refused too.
		if hi, ok := managerDurationMax[f.Name]; ok {
			if d, err := time.ParseDuration(v); err == nil && (d < 0 || d > hi) {
				problem = fmt.Sprintf("--%s %s: want 0..%s", f.Name, v, defaults.FormatDuration(hi))
				return
			}
		}
		// Under a second the mesh watcher would ask the API server's discovery without a pause.
		if d, err := time.ParseDuration(v); f.Name == "mesh-recheck-interval" && err == nil && d > 0 && d < time.Second {
			problem = fmt.Sprintf("--%s %s: want at least 1s", f.Name, v)
			return
		}
		// The Prometheus flags configure the poller --prometheus-url turns on; without it they
		// were passed over.
		if url := fs.Lookup("prometheus-url"); url != nil && url.Value.String() == "" && f.Name != url.Name && strings.HasPrefix(f.Name, "prometheus-") {
			problem = fmt.Sprintf("--%s %s: has no effect without --prometheus-url", f.Name, v)
		}
	})
	return problem
}

// managerDurationMax bounds the manager's duration flags (0 is refused above where it would be
// read as the default).
var managerDurationMax = map[string]time.Duration{
	"leader-elect-lease-duration": time.Hour,
	"leader-elect-renew-deadline": time.Hour,
	"leader-elect-retry-period":   time.Hour,
	"shutdown-delay":              time.Hour,
	"mesh-recheck-interval":       24 * time.Hour,
	"prometheus-interval":         24 * time.Hour,
	"prometheus-window":           24 * time.Hour,
	"prometheus-timeout":          time.Hour,
}

// defaultShutdownDelay is --shutdown-delay's default: long enough for the endpoints controller
// and kube-proxy to take the replica out of the webhook Service and for the API server to use,
// and so close, each connection it holds to it (it calls a webhook several times a second while
// anything is being admitted); the chart's terminationGracePeriodSeconds (15) leaves 10 s to
// stop after it.
const defaultShutdownDelay = 5 * time.Second

// stopAfterDelay is controller-runtime's signal handler with a delay: the first SIGTERM or
// SIGINT sets draining (operator.Options.Draining: the webhook answers close their connections)
// and cancels the returned context delay later; a second signal exits at once (code 1).
func stopAfterDelay(draining *atomic.Bool, delay time.Duration, told func(os.Signal)) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		told(<-sigs)
		draining.Store(true)
		select {
		case <-time.After(delay):
		case <-sigs:
			os.Exit(1)
		}
		cancel()
		<-sigs
		os.Exit(1)
	}()
	return ctx
}

// setupRetry is how often setting up is retried while the API server does not answer.
const setupRetry = time.Second

// defaultGCPercent is the manager's GOGC unless the environment sets one.
const defaultGCPercent = 50

// lostLeadership reports whether the manager ended because it lost its lease, not because it was
// told to stop.
func lostLeadership(ctx context.Context, err error) bool {
	return ctx.Err() == nil && strings.Contains(err.Error(), "leader election lost")
}

// labelList is a repeatable flag of label names (--prometheus-replica-label); checked where the
// client is made (telemetry.CheckReplicaLabels).
// istioDefaultUsage is --istio-default-retries' help: unset, the MeshConfigs decide, so the help
// shows no default.
var istioDefaultUsage = fmt.Sprintf("Istio's default retries for routes that set none, an `int` of 0 or more; unset: the MeshConfigs' defaultHttpRetryPolicy.attempts (ConfigMaps istio-system/istio and istio-system/istio-<rev>, the most of them), else Istio's %d", mesh.IstioDefaultRetries)

// optionalInt64 is an integer flag whose absence means something of its own: it leaves *v nil.
// Before, --istio-default-retries was a plain Int64 flag read only when flag.Visit saw it given,
// and its help said "(default 2)", as if 2 overrode the MeshConfigs when unset.
type optionalInt64 struct{ v **int64 }

func (o optionalInt64) String() string {
	if o.v == nil || *o.v == nil {
		return ""
	}
	return strconv.FormatInt(**o.v, 10)
}

func (o optionalInt64) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	if n < 0 {
		return fmt.Errorf("%d is under 0 (Istio's retries are 0 or more)", n)
	}
	*o.v = &n
	return nil
}

type labelList []string

func (l *labelList) String() string {
	if l == nil || len(*l) == 0 {
		return "prometheus_replica,__replica__"
	}
	return strings.Join(*l, ",")
}

func (l *labelList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// clusterLabelList is the repeatable --prometheus-cluster-label; checked where the client is made
// (telemetry.CheckClusterLabels).
type clusterLabelList struct{ l *[]string }

func (c *clusterLabelList) String() string {
	if c == nil || c.l == nil || len(*c.l) == 0 {
		return "cluster"
	}
	return strings.Join(*c.l, ",")
}

func (c *clusterLabelList) Set(v string) error {
	*c.l = append(*c.l, v)
	return nil
}
