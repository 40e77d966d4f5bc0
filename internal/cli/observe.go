package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/retrycap/retrycap/internal/observe"
)

// ProxyContainerName is the injected sidecar's container name, observe's default -c.
const ProxyContainerName = "retrycap-proxy"

// NewObserveCmd returns `observe`: what really happened, per request, from access logs.
func NewObserveCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var (
		files                                           []string
		fromCluster, allNamespaces                      bool
		selector, container, kubeconfig, kubeCtx, ns, o string
		since                                           time.Duration
		threshold, top                                  int
	)
	cmd := &cobra.Command{
		Use:   "observe [-f LOGS]... [--from-cluster -l SELECTOR]",
		Short: "Per request, what really happened: attempts, services, span, failures and the observed amplification, from access logs",
		Long: `observe reads access logs and groups the attempts per key (Idempotency-Key, else the
traceparent trace id, else the request id: X-Request-Id, or the storm lab's storm-op): the attempts,
the services that took part, the first attempt, the span, the failures and the observed
amplification (the attempts at the deepest service the key reached). It lists the keys with more
than --threshold attempts, worst first, and ends with a summary line.

It reads retrycap-proxy's access log (--access-log, JSON lines) and Envoy's and Istio's access logs
in their default text and JSON formats (keyed by x-request-id), from files, directories (every
file below), stdin ("-", the default without -f and --from-cluster), or with --from-cluster the
logs of container -c of the pods -l selects, through the API server (pods/log; needs list on pods
and get on pods/log).`,
		Example: `  retrycap observe -f /var/log/proxies/
  kubectl logs deploy/order -c retrycap-proxy | retrycap observe
  kubectl retrycap observe --from-cluster -n shop -l app.kubernetes.io/part-of=shop -c retrycap-proxy --since 40m
  kubectl retrycap observe --from-cluster -n istio-system -l app=istio-ingressgateway -c istio-proxy -o json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := func(format string, a ...any) error {
				return &ExitError{Code: ExitBadInput, Msg: "observe: " + fmt.Sprintf(format, a...)}
			}
			if o != "table" && o != "json" {
				return bad("unknown output %q (table, json)", o)
			}
			files = append(files, args...)
			if fromCluster && len(files) > 0 {
				return bad("--from-cluster reads no files; drop -f and the arguments")
			}
			if !fromCluster && (selector != "" || allNamespaces) {
				return bad("-l and -A need --from-cluster")
			}
			if threshold < 0 || top < 0 || since < 0 {
				return bad("--threshold, --top and --since must be >= 0")
			}
			g := observe.NewGrouper()
			if fromCluster {
				if err := readCluster(cmd.Context(), g, clusterSource{kubeconfig, kubeCtx, ns, allNamespaces, selector, container, since}, stderr); err != nil {
					return bad("%v", err)
				}
			} else {
				if len(files) == 0 {
					files = []string{"-"}
				}
				for _, f := range files {
					if err := readPath(g, f, stdin); err != nil {
						return bad("%v", err)
					}
				}
			}
			r := g.Report(threshold, top)
			var err error
			if o == "json" {
				err = r.WriteJSON(stdout)
			} else {
				err = r.WriteTable(stdout)
			}
			if err != nil {
				return bad("%v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&files, "file", "f", nil, `log file or directory ("-" for stdin); repeatable`)
	f.BoolVar(&fromCluster, "from-cluster", false, "read the sidecars' logs from the cluster (pods/log)")
	f.StringVarP(&selector, "selector", "l", "", "--from-cluster: label selector of the pods")
	f.StringVarP(&container, "container", "c", ProxyContainerName, "--from-cluster: the container whose log to read (istio-proxy for Envoy's)")
	f.DurationVar(&since, "since", 0, "--from-cluster: only lines newer than this (e.g. 40m); 0: all")
	f.StringVar(&kubeconfig, "kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&kubeCtx, "context", "", "kubeconfig context to use (default: the current context)")
	f.StringVarP(&ns, "namespace", "n", "", "--from-cluster: namespace of the pods (default: the context's)")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "--from-cluster: every namespace")
	f.IntVar(&threshold, "threshold", 5, "list the keys with more attempts than this")
	f.IntVar(&top, "top", 20, "list at most this many keys (0: all); the summary counts them all")
	f.StringVarP(&o, "output", "o", "table", "output format: table or json")
	return cmd
}

// readPath parses a file, every regular file under a directory, or stdin ("-").
func readPath(g *observe.Grouper, path string, stdin io.Reader) error {
	if path == "-" {
		st, err := observe.Parse(stdin, observe.Source{Name: "stdin"}, g.Add)
		g.AddStats(st)
		return err
	}
	return filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fh, err := os.Open(p)
		if err != nil {
			return err
		}
		defer fh.Close()
		st, err := observe.Parse(fh, observe.Source{Name: p}, g.Add)
		g.AddStats(st)
		return err
	})
}

type clusterSource struct {
	kubeconfig, kubeCtx, namespace string
	all                            bool
	selector, container            string
	since                          time.Duration
}

// readCluster lists the pods the selector picks and streams container's log of each through the
// API server, with a progress line on stderr.
func readCluster(ctx context.Context, g *observe.Grouper, s clusterSource, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = s.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{CurrentContext: s.kubeCtx})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns := s.namespace
	if s.all {
		ns = ""
	} else if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("the kubeconfig context's namespace: %w", err)
		}
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	pods, err := core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.selector})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	var with []corev1.Pod
	for _, p := range pods.Items {
		if hasContainer(&p, s.container) {
			with = append(with, p)
		}
	}
	sort.Slice(with, func(i, j int) bool {
		return with[i].Namespace+"/"+with[i].Name < with[j].Namespace+"/"+with[j].Name
	})
	if len(with) == 0 {
		return fmt.Errorf("no pod with a container %q among the %d pods selected", s.container, len(pods.Items))
	}
	opts := &corev1.PodLogOptions{Container: s.container}
	if s.since > 0 {
		secs := int64((s.since + time.Second - 1) / time.Second)
		opts.SinceSeconds = &secs
	}
	var total observe.Stats
	for i := range with {
		p := &with[i]
		fmt.Fprintf(stderr, "\robserve: pod %d/%d %s/%s (%s attempts so far)", i+1, len(with), p.Namespace, p.Name, observe.Thousands(total.Attempts))
		rc, err := core.Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
		if err != nil {
			fmt.Fprintln(stderr)
			return fmt.Errorf("log of %s/%s container %s: %w", p.Namespace, p.Name, s.container, err)
		}
		st, err := observe.Parse(rc, observe.Source{Name: p.Namespace + "/" + p.Name + "/" + s.container, Service: serviceOfPod(p)}, g.Add)
		rc.Close()
		g.AddStats(st)
		total.Add(st)
		if err != nil {
			fmt.Fprintln(stderr)
			return err
		}
	}
	fmt.Fprintf(stderr, "\robserve: %d pods, %s lines, %s attempts\n", len(with), observe.Thousands(total.Lines), observe.Thousands(total.Attempts))
	return nil
}

func hasContainer(p *corev1.Pod, name string) bool {
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// serviceOfPod is the service a pod's sidecar speaks for, for the Envoy outbound lines that do
// not name their caller: the app.kubernetes.io/name label, else app, else the pod's name.
func serviceOfPod(p *corev1.Pod) string {
	for _, l := range []string{"app.kubernetes.io/name", "app"} {
		if v := p.Labels[l]; v != "" {
			return v
		}
	}
	return p.Name
}
