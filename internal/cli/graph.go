package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/kubeobj"
	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/workload"
)

// NewGraphCmd returns `graph`: the live call graph of each RetryPolicy (and ClusterRetryPolicy)
// in a cluster.
func NewGraphCmd(_ io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var kubeconfig, kubeContext, namespace, output string
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "graph [POLICY] [-n NAMESPACE | -A]",
		Short: "Show the live call graph of each RetryPolicy: the attempts on every edge, the worst path marked",
		Long: `graph reads the RetryPolicies, the workloads (Deployments, StatefulSets, DaemonSets, CronJobs,
Jobs and ReplicaSets no controller owns, and bare Pods) and the Services of a namespace from the
cluster and prints each policy's graph, computed exactly as the controller computes its status:
as a tree from the entrypoints with the attempts on each edge ("-x3->") and the worst path
marked "*", or as JSON, Graphviz DOT or Mermaid.

The cluster is found like kubectl finds it: --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
else the in-cluster service account; the namespace defaults to the kubeconfig context's.
Upstream names resolve through the namespace's Services, as in the controller: a Service's
selector picks the workloads behind the name. A policy that selects no workload, or whose
workloads declare no upstreams, is said so on stderr: it is not "within its cap".
The ClusterRetryPolicies that select the namespace (with -A: every one) are shown too, each over
every namespace it selects, nodes named "name.namespace"; POLICY names either kind (a
RetryPolicy of the namespace and a ClusterRetryPolicy of that name that selects it are both shown).
It needs get/list on retrypolicies, clusterretrypolicies, namespaces, deployments, statefulsets,
daemonsets, replicasets, jobs, cronjobs, pods and services.

Exit status: 0 when every policy shown is within its cap; 1 when one is over its cap or has a
retry cycle; 2 when the cluster cannot be reached or read, or on bad flags.`,
		Example: `  retrycap graph -n shop
  kubectl retrycap graph checkout -n shop -o dot | dot -Tsvg > checkout.svg
  kubectl retrycap graph -A -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("graph: one POLICY name at most, got %d: %s", len(args), strings.Join(args, " "))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			render, ok := renderers[output]
			if !ok || output == "table" || output == "sarif" {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("graph: unknown output %q (tree, json, dot, mermaid)", output)}
			}
			if allNamespaces && len(args) == 1 {
				return &ExitError{Code: ExitBadInput, Msg: "graph: a POLICY name needs one namespace; drop -A"}
			}
			if allNamespaces && cmd.Flags().Changed("namespace") {
				return &ExitError{Code: ExitBadInput, Msg: "graph: -n and -A exclude each other"}
			}
			if len(args) == 1 && len(validation.IsDNS1123Subdomain(args[0])) > 0 {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("graph: POLICY %q: not a policy name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.')", args[0])}
			}
			// "" is the context's namespace, as the flag's default.
			if namespace != "" {
				if err := checkNamespace("graph", namespace); err != nil {
					return err
				}
			}
			cc, cfg, err := loadKubeconfig(kubeconfig, kubeContext)
			if err != nil {
				return &ExitError{Code: ExitBadInput, Msg: "graph: " + err.Error()}
			}
			ns := namespace
			if allNamespaces {
				ns = ""
			} else if ns == "" {
				if ns, _, err = cc.Namespace(); err != nil {
					return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("graph: the kubeconfig context's namespace: %v", err)}
				}
			}
			c, err := client.New(cfg, client.Options{Scheme: retrycapscheme.New()})
			if err != nil {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("graph: connecting to %s: %v", cfg.Host, err)}
			}
			policy := ""
			if len(args) == 1 {
				policy = args[0]
			}
			rep, notes, err := liveReport(cmd.Context(), c, ns, policy)
			if errors.Is(err, errNotInstalled) {
				// Which cluster: the user may have several contexts, and the kubeconfig was
				// found, not given (before: "the cluster serves no RetryPolicy", no server).
				return &ExitError{Code: ExitBadInput, Msg: "graph: " + strings.Replace(err.Error(), "the cluster ", "the cluster at "+cfg.Host+" ", 1)}
			}
			if err != nil {
				return &ExitError{Code: ExitBadInput, Msg: "graph: " + err.Error()}
			}
			// What the tree cannot show: a policy with nothing to check is not "within its cap".
			for _, n := range notes {
				fmt.Fprintln(stderr, n)
			}
			if len(rep.Policies) == 0 {
				where := "in namespace " + ns
				if ns == "" {
					where = "in any namespace"
				}
				if ns != "" {
					where += "; -A looks in every namespace"
				}
				fmt.Fprintf(stderr, "No RetryPolicy or ClusterRetryPolicy found %s.\n", where)
				return nil
			}
			if err := render(stdout, rep); err != nil {
				return &ExitError{Code: ExitBadInput, Msg: err.Error()}
			}
			if !rep.WithinCap {
				return &ExitError{Code: ExitOverCap}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context to use (default: the current context)")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the policies and workloads (default: the context's namespace)")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "every namespace")
	f.StringVarP(&output, "output", "o", "tree", "output format: tree, json, dot or mermaid")
	return cmd
}

// errNotInstalled is liveReport's error for a cluster without the RetryPolicy kind.
var errNotInstalled = errors.New("the cluster serves no RetryPolicy (retrycap.dev/v1alpha1): retrycap is not installed there (helm install retrycap charts/retrycap: docs/helm.md; the CRDs alone: make install)")

// liveReport reads the policies of ns ("" = every namespace; policy, if set, only that one)
// and their namespaces' workloads and Services, and analyses them with the shared builder, as
// the controller does. notes say, per policy, what its WithinCap condition says when there is
// nothing to check (it selects no workload, or none declares upstreams).
func liveReport(ctx context.Context, c client.Reader, ns, policy string) (*analyze.Report, []string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var list v1alpha1.RetryPolicyList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		// The cluster has no RetryPolicy kind: client-go's "no matches for kind" says which kind,
		// not that retrycap is not installed there, nor how to install it.
		if meta.IsNoMatchError(err) {
			return nil, nil, errNotInstalled
		}
		return nil, nil, fmt.Errorf("listing RetryPolicies: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	found := false
	workloadsOf := map[string][]workload.Workload{}
	servicesOf := map[string][]workload.Service{}
	var prs []analyze.PolicyReport
	var notes []string
	for i := range list.Items {
		p := &list.Items[i]
		if policy != "" && p.Name != policy {
			continue
		}
		found = true
		ws, ok := workloadsOf[p.Namespace]
		if !ok {
			var err error
			if ws, err = kubeobj.ListWorkloads(ctx, c, p.Namespace); err != nil {
				return nil, nil, err
			}
			workloadsOf[p.Namespace] = ws
			svcs, err := kubeobj.ListServices(ctx, c, p.Namespace)
			if err != nil {
				return nil, nil, err
			}
			servicesOf[p.Namespace] = svcs
		}
		r, a := workload.Analyze(workload.ForRetryPolicy(p), ws, nil, servicesOf[p.Namespace]...)
		prs = append(prs, analyze.FromAnalysis(p, r, a))
		if n := nothingToCheck(r); n != "" {
			notes = append(notes, "RetryPolicy "+p.Namespace+"/"+p.Name+": "+n)
		}
	}
	cprs, cnotes, cfound, err := liveClusterReports(ctx, c, ns, policy)
	if err != nil {
		return nil, nil, err
	}
	prs, notes = append(prs, cprs...), append(notes, cnotes...)
	if policy != "" && !found && !cfound {
		return nil, nil, fmt.Errorf("RetryPolicy %s/%s not found (nor a ClusterRetryPolicy %s selecting namespace %s)", ns, policy, policy, ns)
	}
	return analyze.NewReport(prs), notes, nil
}

// liveClusterReports are the reports of the ClusterRetryPolicies that select namespace ns (""
// = every cluster policy; policy, if set, only that one), each over the workloads and Services
// of every namespace it selects, as the controller builds it. A cluster without the
// ClusterRetryPolicy CRD has none.
func liveClusterReports(ctx context.Context, c client.Reader, ns, policy string) (prs []analyze.PolicyReport, notes []string, found bool, err error) {
	var list v1alpha1.ClusterRetryPolicyList
	if err := c.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil, false, nil
		}
		return nil, nil, false, fmt.Errorf("listing ClusterRetryPolicies: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil, false, nil
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var nsList corev1.NamespaceList
	if err := c.List(ctx, &nsList); err != nil {
		return nil, nil, false, fmt.Errorf("listing Namespaces: %w", err)
	}
	labels := make(map[string]map[string]string, len(nsList.Items))
	for _, n := range nsList.Items {
		labels[n.Name] = n.Labels
	}
	workloadsOf := map[string][]workload.Workload{}
	servicesOf := map[string][]workload.Service{}
	for i := range list.Items {
		p := &list.Items[i]
		if policy != "" && p.Name != policy {
			continue
		}
		s, err := workload.NewClusterScope(p, labels)
		if err != nil {
			notes = append(notes, err.Error())
			continue
		}
		if ns != "" && !s.Has(ns) {
			continue
		}
		found = true
		var ws []workload.Workload
		var svcs []workload.Service
		for _, sns := range s.Namespaces() {
			if _, ok := workloadsOf[sns]; !ok {
				if workloadsOf[sns], err = kubeobj.ListWorkloads(ctx, c, sns); err != nil {
					return nil, nil, false, err
				}
				if servicesOf[sns], err = kubeobj.ListServices(ctx, c, sns); err != nil {
					return nil, nil, false, err
				}
			}
			ws, svcs = append(ws, workloadsOf[sns]...), append(svcs, servicesOf[sns]...)
		}
		r, a := workload.Analyze(workload.ForClusterRetryPolicy(p, s), ws, nil, svcs...)
		prs = append(prs, analyze.FromResult(r, a))
		if n := nothingToCheck(r); n != "" {
			notes = append(notes, r.PolicyName()+": "+n)
		}
	}
	return prs, notes, found, nil
}

// nothingToCheck is the WithinCap condition's message when the policy has nothing to check
// (status.NothingSelectedMessage, status.NoUpstreamsMessage), else "".
func nothingToCheck(r *workload.Result) string {
	switch {
	case len(r.Errors) > 0:
		return ""
	case len(r.Selected) == 0:
		return status.NothingSelected(r)
	case r.Declaring == 0:
		return status.NoUpstreamsMessage(len(r.Selected))
	}
	return ""
}
