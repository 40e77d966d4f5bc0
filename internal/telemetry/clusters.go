package telemetry

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
)

// ClusterLabels are the labels that name a series' cluster where one Prometheus holds several
// clusters' series (a Thanos or a federation over several clusters, each Prometheus with its
// own external label): the Prometheus Operator's and most setups' external label, cluster. The
// queries group by them (QueriesWith), and Read and promquery's Series refuse answers holding
// several of their values unless one is chosen (OneClusterBy): summed, the same workload name in
// two clusters would be one caller. Istio's own source_cluster is read apart (oneCluster). A
// querier whose cluster label is another (Linkerd multicluster setups name it as they like, an
// OpenTelemetry resource attribute k8s.cluster.name is k8s_cluster_name) is named with
// --prometheus-cluster-label, which replaces this list.
var ClusterLabels = []string{"cluster"}

// CheckClusterLabels refuses cluster labels that are no Prometheus label name, given twice, a
// label the queries read an edge by (the caller label included), or a replica label: a label
// that tells edges or replicas apart taken for a cluster would refuse every read.
func CheckClusterLabels(labels, replicaLabels []string, callerLabel string) error {
	if callerLabel == "" {
		callerLabel = "service"
	}
	if len(replicaLabels) == 0 {
		replicaLabels = ReplicaLabels
	}
	edge := fmt.Sprintf("a label the queries read an edge by (caller label %q)", callerLabel)
	taken := map[string]string{}
	for _, l := range EdgeLabels(callerLabel) {
		taken[l] = edge
	}
	for _, l := range replicaLabels {
		taken[l] = "a replica label (--prometheus-replica-label)"
	}
	seen := map[string]bool{}
	for _, l := range labels {
		switch {
		case !model.LegacyValidation.IsValidLabelName(l):
			return fmt.Errorf("--prometheus-cluster-label %q: not a Prometheus label name", l)
		case taken[l] != "":
			return fmt.Errorf("--prometheus-cluster-label %q: %s: it is no cluster's", l, taken[l])
		case seen[l]:
			return fmt.Errorf("--prometheus-cluster-label %q: given twice", l)
		}
		seen[l] = true
	}
	// The queries group by each cluster label's renamed form too (RenamedLabels): a replica or
	// caller label of that name would be grouped by twice and read as a cluster.
	if len(labels) == 0 {
		labels = ClusterLabels
	}
	for _, x := range RenamedLabels(labels) {
		if taken[x] != "" {
			return fmt.Errorf("cluster label %q: its renamed form %q (a federation without honor_labels: true writes a series' own %s there) is %s", strings.TrimPrefix(x, ExportedPrefix), x, strings.TrimPrefix(x, ExportedPrefix), taken[x])
		}
	}
	return nil
}

// ExportedPrefix is what a scrape without honor_labels: true (Prometheus' default, and so a
// federation job's unless set) puts before a label of the series that its target's labels also
// have: the series' own cluster label becomes exported_cluster, and cluster is the scrape
// target's (a federation job labelled with its hub's cluster, one value for every cluster it
// federates).
const ExportedPrefix = "exported_"

// RenamedLabels are the renamed forms of labels that are not themselves among labels: the
// labels the queries group by besides labels, so that a renamed cluster label is seen.
func RenamedLabels(labels []string) []string {
	var out []string
	for _, l := range labels {
		if x := ExportedPrefix + l; !strings.HasPrefix(l, ExportedPrefix) && !slices.Contains(labels, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// clusterOf is a series' cluster: the first of labels it has, and that label; "" when none. A
// label's renamed form (ExportedPrefix) comes first: it is the series' own, the label itself
// the scrape target's.
func clusterOf(m model.Metric, labels []string) (value, label string) {
	for _, l := range labels {
		if x := ExportedPrefix + l; !strings.HasPrefix(l, ExportedPrefix) && !slices.Contains(labels, x) {
			if v := m[model.LabelName(x)]; v != "" {
				return string(v), x
			}
		}
	}
	for _, l := range labels {
		if v := m[model.LabelName(l)]; v != "" {
			return string(v), l
		}
	}
	return "", ""
}

// OneClusterBy keeps, across the vectors of one read, the series of one cluster (labels:
// ClusterLabels when nil): want's, and those that name no cluster; other are the series of the
// other clusters, not read. With want "" a read holding several clusters is an error naming the
// label and the values (their calls would be added per workload name); so is a want that no
// series names while others do. vs itself when no series names a cluster. A series whose
// cluster label a scrape renamed (exported_cluster: a federation without honor_labels: true) is
// of the cluster that label names, never of the scrape target's: several such clusters are an
// error naming the renamed label and the fixes; one is read, and note says so (Read warns).
func OneClusterBy(vs []model.Vector, labels []string, want string) (out []model.Vector, other []*model.Sample, err error) {
	out, other, _, err = OneClusterNoted(vs, labels, want)
	return out, other, err
}

// OneClusterNoted is OneClusterBy with the note on renamed cluster labels ("" when none).
func OneClusterNoted(vs []model.Vector, labels []string, want string) (out []model.Vector, other []*model.Sample, note string, err error) {
	if len(labels) == 0 {
		labels = ClusterLabels
	}
	seen := map[string]bool{}
	var names []string
	byLabel := map[string]bool{}
	var renamed []string // the renamed labels seen, and an example of each
	example := map[string]string{}
	for _, v := range vs {
		for _, s := range v {
			c, l := clusterOf(s.Metric, labels)
			if c == "" {
				continue
			}
			byLabel[l] = true
			if strings.HasPrefix(l, ExportedPrefix) && !slices.Contains(labels, l) {
				// The least as the example: the same whatever the answers' order.
				if m := s.Metric.String(); example[l] == "" {
					renamed = append(renamed, l)
					example[l] = m
				} else if m < example[l] {
					example[l] = m
				}
			}
			if !seen[c] {
				seen[c] = true
				names = append(names, strconv.Quote(c))
			}
		}
	}
	sort.Strings(renamed)
	if len(renamed) > 0 {
		orig := strings.TrimPrefix(renamed[0], ExportedPrefix)
		fix := fmt.Sprintf("--prometheus-cluster-label %s (so the graph reads it), or honor_labels: true on the federation's scrape job (so the series keep %s)", renamed[0], orig)
		if want == "" && len(seen) > 1 {
			sort.Strings(names)
			return nil, nil, "", fmt.Errorf("the answers hold the series of %d clusters (%s): a scrape without honor_labels: true (a federation's) renamed the series' own cluster label %s to %s (e.g. %s), so %s is the scrape target's and would read them as one cluster, their calls added; "+
				"pick the cluster with --cluster (discover) or --prometheus-cluster (the manager), and name the label with %s",
				len(seen), strings.Join(names, ", "), orig, renamed[0], example[renamed[0]], orig, fix)
		}
		note = fmt.Sprintf("a scrape without honor_labels: true (a federation's) renamed the series' own cluster label %s to %s: read as their cluster, %s being the scrape target's; say so with %s", orig, renamed[0], orig, fix)
	}
	if len(seen) == 0 && want == "" {
		return vs, nil, note, nil
	}
	sort.Strings(names)
	ls := make([]string, 0, len(byLabel))
	for l := range byLabel {
		ls = append(ls, l)
	}
	sort.Strings(ls)
	switch {
	case want == "" && len(seen) > 1:
		return nil, nil, "", fmt.Errorf("the answers hold the series of %d clusters (label %s: %s): a workload of one namespace and name in each would be read as one caller, their calls added; "+
			"pick the cluster with --cluster (discover) or --prometheus-cluster (the manager), or, if %s names no cluster (a pod's label), name the label that does with --prometheus-cluster-label",
			len(seen), strings.Join(ls, ", "), strings.Join(names, ", "), strings.Join(ls, ", "))
	case want == "" || (len(seen) == 1 && seen[want]):
		return vs, nil, note, nil
	case !seen[want] && len(seen) > 0:
		return nil, nil, "", fmt.Errorf("cluster %q (--cluster, --prometheus-cluster): no series of it; the answers hold those of %s (label %s)", want, strings.Join(names, ", "), strings.Join(ls, ", "))
	case len(seen) == 0:
		return vs, nil, note, nil // no series names a cluster: all of them are read
	}
	out = make([]model.Vector, len(vs))
	for i, v := range vs {
		kept := make(model.Vector, 0, len(v))
		for _, s := range v {
			if c, _ := clusterOf(s.Metric, labels); c != "" && c != want {
				other = append(other, s)
				continue
			}
			kept = append(kept, s)
		}
		out[i] = kept
	}
	return out, other, note, nil
}
