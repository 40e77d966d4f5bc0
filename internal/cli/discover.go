package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/promquery"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// NewDiscoverCmd returns `discover`: the retrycap.dev/upstreams each workload needs, from the
// edges a Prometheus has observed and the Services the manifests' env names.
func NewDiscoverCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var (
		files, kustomizations, gateways []string
		replicaLabels                   []string
		recursive, allNamespaces        bool
		namespace, output, promURL      string
		callerLabel, istioCluster       string
		cluster                         string
		clusterLabels                   []string
		since, timeout                  time.Duration
		seriesLimit                     uint64
		auth                            promquery.Auth
		maxAnswer                       = promquery.Size(promquery.DefaultMaxAnswerBytes)
	)
	cmd := &cobra.Command{
		Use:   "discover [--prometheus-url URL] [-f PATH | -k DIR]... [-n NAMESPACE | -A]",
		Short: "Propose the retrycap.dev/upstreams each workload needs, from observed telemetry and the manifests' env",
		Long: `discover finds the calls each workload makes and writes them as the retrycap.dev/upstreams
annotation it needs, without attempts (one try each: no telemetry shows an application's own
retries; add =N by hand where the app retries).

From a Prometheus (--prometheus-url; the counters' increase over --since, to the second): Istio's
istio_requests_total (reporters source and waypoint; destination over source gives the sidecars'
tries per call, shown beside), Linkerd's response_total{direction="outbound"} and its route series,
the OpenTelemetry service graph's traces_service_graph_request_total, retrycap-proxy's
retrycap_proxy_requests_total: each detected by whether its series exist. An edge whose counter did
not increase over the window is not observed. Mesh gateways (istio-ingressgateway, Gateway API
gateways, --gateway) are callers, never workloads: their callees are entrypoints. TCP-only,
database and messaging edges are listed apart, never proposed.

From manifests (-f, -k): container env values, and the ConfigMaps env and envFrom reference, that
name a Service: http://name:port/..., dns:///name:port and xds:///name:port (gRPC), name:port,
name.ns[.svc[.cluster.local]]; and the items of command and args in the forms with a port, a
scheme or .svc ("--flag=value" read as its value). They
over-approximate (a shared ConfigMap names Services a workload may never call): each is marked
with its variable, and with a Prometheus too, the ones it did not observe are marked notObserved.

A workload that already declares retrycap.dev/upstreams keeps it: the differences are listed.
-o yaml (default) and -o json: {workloads: [{namespace, kind, name, upstreams, annotation,
discovered, differences}], entrypoints, nonHTTP, warnings}; -o patch: one merge patch per
workload to annotate (kubectl patch KIND NAME -n NS --type merge --patch-file FILE).

Exit status: 0 when something was found; 2 on bad input, when Prometheus cannot be queried
(unreachable, an auth failure, a timeout, an answer at --prometheus-series-limit or over
--prometheus-max-answer-size, a value that is not a count), and when nothing was found at all.
See docs/telemetry.md.`,
		Example: `  retrycap discover --prometheus-url http://prometheus.monitoring:9090 -n shop --since 1h
  retrycap discover -f release/kubernetes-manifests.yaml -o patch > upstreams.yaml
  kubectl retrycap discover --prometheus-url http://localhost:9090 -k overlays/prod -A -o json`,
		Args: noArgs("manifests are given with -f (-f ARG) or -k, Prometheus with --prometheus-url"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bad := func(format string, a ...any) error {
				return &ExitError{Code: ExitBadInput, Msg: "discover: " + fmt.Sprintf(format, a...)}
			}
			if output != "yaml" && output != "json" && output != "patch" {
				return bad("unknown output %q (yaml, json, patch)", output)
			}
			if promURL == "" && len(files) == 0 && len(kustomizations) == 0 {
				return bad("--prometheus-url URL, -f PATH or -k DIR is required")
			}
			if allNamespaces && cmd.Flags().Changed("namespace") {
				return bad("-n and -A exclude each other")
			}
			if err := checkNamespace("discover", namespace); err != nil {
				return err
			}
			if err := stdinOnce("discover", "-f -", files); err != nil {
				return err
			}
			if recursive && len(files) == 0 {
				return bad("-R reads the directories given with -f, and no -f is given")
			}
			for _, g := range gateways {
				if !checkWorkloadRef(g) {
					return bad("--gateway %q: want NAME or NAMESPACE/NAME (a DNS-1123 label, a workload name)", g)
				}
			}
			if since < time.Second || since%time.Second != 0 {
				return bad("--since %s: want whole seconds, at least 1s", since)
			}
			// 0 in promquery.Options means "the default": given on the command line it was taken
			// silently for 10s, or 10000 series (and -1s the same).
			if cmd.Flags().Changed("prometheus-timeout") && timeout <= 0 {
				return bad("--prometheus-timeout %s: want more than 0 (leave the flag out for the default, %s)", timeout, promquery.DefaultTimeout)
			}
			if cmd.Flags().Changed("prometheus-series-limit") && seriesLimit == 0 {
				return bad("--prometheus-series-limit 0: want at least 1 (leave the flag out for the default, %d)", promquery.DefaultSeriesLimit)
			}
			// One run, one read: a missing credential file is said before any query (the
			// manager, which re-reads them for rotation, finds them per query).
			for _, cf := range []struct{ flag, path string }{{"prometheus-bearer-token-file", auth.BearerTokenFile}, {"prometheus-password-file", auth.PasswordFile}} {
				if cf.path == "" {
					continue
				}
				if st, err := os.Stat(cf.path); err != nil {
					return bad("--%s %q: %v", cf.flag, cf.path, err)
				} else if st.IsDir() {
					return bad("--%s %q: a directory, want a file", cf.flag, cf.path)
				}
			}
			in := telemetry.Input{Gateways: gateways}
			if cmd.Flags().Changed("namespace") {
				in.InScope = func(ns string) bool { return ns == namespace }
			}
			// readWarns are what reading the manifests warned of: with the result's, they are
			// printed grouped (analyze.GroupWarnings: a directory of 100 files gave 117 lines of
			// "is also at", one per object) and listed whole in -o json and -o yaml.
			var readWarns []string
			printReadWarns := func() {
				for _, w := range readWarns {
					fmt.Fprintln(stderr, "warning:", w)
				}
			}
			if len(files) > 0 || len(kustomizations) > 0 {
				m, ms, errs := readDiscoverManifests(stdin, files, kustomizations, namespace, recursive)
				for _, w := range m.Warnings {
					readWarns = append(readWarns, w.String())
				}
				if len(errs) > 0 {
					printReadWarns()
					for _, err := range errs {
						fmt.Fprintln(stderr, "error:", err)
					}
					return bad("%d error(s) in the input", len(errs))
				}
				pods, warns := ms.Pods()
				readWarns = append(readWarns, warns...)
				pods, services := readObjects(m, pods, ms.Services)
				in.Workloads, in.Pods, in.Services = m.Workloads, pods, services
				if in.Pods == nil {
					in.Pods = []telemetry.PodEnv{}
				}
			}
			if promURL != "" {
				c, err := promquery.New(promquery.Options{URL: promURL, Window: since, Timeout: timeout, SeriesLimit: seriesLimit, CallerLabel: callerLabel, Auth: auth, MaxAnswerBytes: int64(maxAnswer), IstioCluster: istioCluster, ReplicaLabels: replicaLabels,
					ClusterLabels: clusterLabels, Cluster: cluster})
				if err != nil {
					printReadWarns()
					return bad("%v", err)
				}
				ctx := cmd.Context()
				if ctx == nil {
					ctx = context.Background()
				}
				ob, err := c.Graph(ctx, time.Now(), gateways)
				if err != nil {
					printReadWarns()
					return bad("Prometheus at %s: %v", c.URL(), err)
				}
				in.Observation = ob
			}
			res := telemetry.Discover(in)
			res.Warnings = append(readWarns, res.Warnings...)
			for _, w := range analyze.GroupWarnings(res.Warnings) {
				fmt.Fprintln(stderr, "warning:", w)
			}
			var err error
			switch output {
			case "json":
				err = telemetry.RenderJSON(stdout, res)
			case "yaml":
				err = telemetry.RenderYAML(stdout, res)
			default:
				err = telemetry.RenderPatch(stdout, res)
			}
			if err != nil {
				return bad("%v", err)
			}
			if !res.Found() {
				what := []string{}
				if promURL != "" {
					srcs := "no source's series exist"
					switch ob := in.Observation; {
					case len(ob.PresentOnly) > 0:
						// increase() answers a series only with two samples in the window.
						srcs = fmt.Sprintf("no query's increase() answered a series, yet series of %s exist: increase() needs two samples of a series within --since %s, which a window shorter than twice the scrape interval (Prometheus' default scrape_interval is 1m) does not hold; raise --since",
							strings.Join(ob.PresentOnly, ", "), since)
					case len(ob.Sources) > 0 && len(ob.Warnings) > 0:
						// "none increased" would be false here: the series may well have
						// increased, and were refused (a label that is no name, a passthrough
						// cluster, ...); the warnings above say which and why.
						srcs = fmt.Sprintf("series of %v exist, none increased on an edge that could be placed: %d warning(s) above say what was refused", ob.Sources, len(ob.Warnings))
					case len(ob.Sources) > 0:
						srcs = fmt.Sprintf("series of %v exist, none increased", ob.Sources)
					}
					what = append(what, fmt.Sprintf("no edge observed over %s at %s (%s)", since, promURL, srcs))
				}
				if in.Pods != nil {
					what = append(what, fmt.Sprintf("no env value of %d workload(s) names a Service", len(in.Pods)))
				}
				return bad("nothing found: %s", strings.Join(what, "; "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&files, "filename", "f", nil, "file, directory or - for stdin; repeatable")
	f.BoolVarP(&recursive, "recursive", "R", false, "read the directories given with -f recursively")
	f.StringArrayVarP(&kustomizations, "kustomize", "k", nil, "a kustomization directory, built as kustomize build does; repeatable")
	f.StringVarP(&output, "output", "o", "yaml", "output format: yaml, json or patch")
	f.StringVarP(&namespace, "namespace", "n", "default", "only the workloads of this namespace, also the namespace of manifests' objects that name none; without -n every namespace is read and those objects are in \"default\"")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "every namespace (the default without -n)")
	f.StringVar(&promURL, "prometheus-url", "", "Prometheus base URL to read the observed edges from")
	f.DurationVar(&since, "since", promquery.DefaultWindow, "the window the counters' increase is taken over, in whole seconds")
	f.DurationVar(&timeout, "prometheus-timeout", promquery.DefaultTimeout, "bound of one query (HTTP request and Prometheus' evaluation)")
	f.Uint64Var(&seriesLimit, "prometheus-series-limit", promquery.DefaultSeriesLimit, "most series one query may return (one per edge); an answer that reaches it is an error, not a truncated graph")
	f.Var(&maxAnswer, "prometheus-max-answer-size", "most bytes one answer may hold, a Kubernetes quantity (128Mi, 1Gi); an answer over it is an error, never read whole: raise it for a cluster whose answers are larger")
	f.StringVar(&callerLabel, "prometheus-caller-label", promquery.DefaultCallerLabel, "the label naming the calling service on retrycap-proxy's series (the scrape adds it)")
	f.StringVar(&auth.BearerTokenFile, "prometheus-bearer-token-file", "", "file holding a bearer token for --prometheus-url; exclusive with basic auth")
	f.StringVar(&auth.Username, "prometheus-username", "", "HTTP basic auth user for --prometheus-url (with --prometheus-password-file)")
	f.StringVar(&auth.PasswordFile, "prometheus-password-file", "", "file holding the HTTP basic auth password for --prometheus-url")
	f.StringVar(&auth.CAFile, "prometheus-ca-file", "", "PEM CA bundle that verifies an https --prometheus-url's certificate")
	f.StringArrayVar(&replicaLabels, "prometheus-replica-label", nil, "a `label` that tells an HA pair's Prometheus replicas apart where the querier does not deduplicate them (Thanos Query's --query.replica-label: each series is read once across it, the largest); repeatable, replaces the defaults prometheus_replica and __replica__")
	f.StringVar(&cluster, "cluster", "", "the `value` of the cluster label (--prometheus-cluster-label, cluster by default: an external label) whose series are read when --prometheus-url holds several clusters'; several without it are an error")
	f.StringArrayVar(&clusterLabels, "prometheus-cluster-label", nil, "a `label` that names a series' cluster where --prometheus-url holds several clusters' (an external label); repeatable, replaces the default cluster")
	f.StringVar(&istioCluster, "istio-cluster", "", "the Istio cluster (source_cluster) whose series are read when --prometheus-url holds several clusters' (a Thanos or a federation over a multi-cluster mesh); several without it are an error")
	f.StringArrayVar(&gateways, "gateway", nil, "NAMESPACE/NAME or NAME: a gateway workload besides istio-ingressgateway, istio-egressgateway and those the manifests label as gateways; repeatable")
	return cmd
}

// readDiscoverManifests reads -f and -k through analyze's reader (workloads, annotations,
// Services) and, from the same bytes, the env, ConfigMaps and Service ports discover needs.
func readDiscoverManifests(stdin io.Reader, files, kustomizations []string, namespace string, recursive bool) (*analyze.Manifests, *telemetry.ManifestSet, []error) {
	m := analyze.NewManifests()
	ms := telemetry.NewManifestSet(namespace)
	var errs []error
	name, n := "", 0 // the file being read and its object count, for the env reader's errors
	var envErrs []error
	// The env reader takes each object the analyze reader parsed (Reader.Each): one YAML parse
	// of every file, not two.
	rd := analyze.Reader{DefaultNamespace: namespace, Recursive: recursive, Each: func(js []byte) {
		n++
		if err := ms.AddObject(js); err != nil {
			envErrs = append(envErrs, fmt.Errorf("%s: document %d: %w", name, n, err))
		}
	}}
	// The analyze reader reads each stream as analyze does: at most analyze.MaxInputBytes (a
	// stream that never ends, -f /dev/zero, is refused, not read until memory runs out) and a
	// byte-order mark decoded. The env reader's errors of a file count only when the analyze
	// reader found none in it: it decodes the same objects into the same types, and its errors
	// ("decoding a Deployment: json: cannot unmarshal number into Go struct field
	// EnvVar.spec.template.spec.containers.env.value of type string") said again, less well,
	// what analyze's had said (before, each such document was two errors).
	read := func(file string, in io.Reader) {
		name, n, envErrs = file, 0, nil
		more := rd.Read(m, file, in)
		if len(more) > 0 {
			errs = append(errs, more...)
		} else {
			errs = append(errs, envErrs...)
		}
	}
	for _, p := range files {
		if p == "-" {
			read("-", stdin)
			continue
		}
		paths, err := rd.Files(m, p)
		if err != nil {
			return m, ms, append(errs, err)
		}
		for _, f := range paths {
			fh, err := os.Open(f)
			if err != nil {
				return m, ms, append(errs, err)
			}
			read(f, fh)
			fh.Close()
		}
	}
	for _, k := range kustomizations {
		name, n, envErrs = k, 0, nil
		more := rd.ReadKustomization(m, k, Kustomize)
		if len(more) > 0 {
			errs = append(errs, more...)
		} else {
			errs = append(errs, envErrs...)
		}
	}
	return m, ms, errs
}

// readObjects keeps of the env reader's pods and Services those analyze read as objects: a
// document it skipped (a Helm template that parses, "name: '{{ .Release.Name }}-web'") is no
// workload and no Service. Before, discover proposed a patch for Deployment
// shop/{{ .Release.Name }}-web from its env, exit 0.
func readObjects(m *analyze.Manifests, pods []telemetry.PodEnv, services []telemetry.ServiceDef) ([]telemetry.PodEnv, []telemetry.ServiceDef) {
	workloads, svcs := map[string]bool{}, map[string]bool{}
	for _, w := range m.Workloads {
		workloads[w.Key()] = true
	}
	for _, s := range m.Services {
		svcs[s.Namespace+"/"+s.Name] = true
	}
	pods = slices.DeleteFunc(pods, func(p telemetry.PodEnv) bool { return !workloads[p.Key()] })
	services = slices.DeleteFunc(services, func(s telemetry.ServiceDef) bool { return !svcs[s.Namespace+"/"+s.Name] })
	return pods, services
}
