package telemetry

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
)

func TestOneClusterBy(t *testing.T) {
	s := func(cluster string, v float64) *model.Sample {
		m := model.Metric{"namespace": "shop", "service": "web", "upstream": "payment"}
		if cluster != "" {
			m["k8s_cluster_name"] = model.LabelValue(cluster)
		}
		return &model.Sample{Metric: m, Value: model.SampleValue(v)}
	}
	labels := []string{"cluster", "k8s_cluster_name"}
	two := []model.Vector{{s("east", 10), s("", 1)}, {s("west", 30)}}
	for _, tc := range []struct {
		name, want string
		vs         []model.Vector
		out, other string
		err        string
	}{
		{name: "no cluster", vs: []model.Vector{{s("", 1)}}, out: "[[1]]", other: "0"},
		{name: "one cluster, none chosen", vs: []model.Vector{{s("east", 10)}, {s("", 1)}}, out: "[[10] [1]]", other: "0"},
		{name: "two clusters, none chosen", vs: two,
			err: `the answers hold the series of 2 clusters (label k8s_cluster_name: "east", "west"): a workload of one namespace and name in each would be read as one caller, their calls added; ` +
				`pick the cluster with --cluster (discover) or --prometheus-cluster (the manager), or, if k8s_cluster_name names no cluster (a pod's label), name the label that does with --prometheus-cluster-label`},
		{name: "two clusters, east chosen: east's and the unlabelled", want: "east", vs: two, out: "[[10 1] []]", other: "1"},
		{name: "a cluster no series names", want: "north", vs: two, err: `cluster "north" (--cluster, --prometheus-cluster): no series of it; the answers hold those of "east", "west" (label k8s_cluster_name)`},
		{name: "a cluster chosen, none named", want: "north", vs: []model.Vector{{s("", 1)}}, out: "[[1]]", other: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, other, err := OneClusterBy(tc.vs, labels, tc.want)
			if fmt.Sprint(err) != fmt.Sprint(map[bool]any{true: nil, false: tc.err}[tc.err == ""]) {
				t.Fatalf("error %v, want %s", err, tc.err)
			}
			if err != nil {
				return
			}
			var vals [][]float64
			for _, v := range out {
				row := []float64{}
				for _, x := range v {
					row = append(row, float64(x.Value))
				}
				vals = append(vals, row)
			}
			if fmt.Sprint(vals) != tc.out || fmt.Sprint(len(other)) != tc.other {
				t.Fatalf("out %v, other %d; want %s, %s", vals, len(other), tc.out, tc.other)
			}
		})
	}
}

// TestOneClusterByRenamed: a series whose cluster label a federation without honor_labels
// renamed (exported_cluster) is of the cluster it names, never of the target's cluster label:
// two such clusters are refused naming the label and the fixes (the least series the
// example), one is read with a note.
func TestOneClusterByRenamed(t *testing.T) {
	s := func(exported string, v float64) *model.Sample {
		return &model.Sample{Metric: model.Metric{"cluster": "hub", "exported_cluster": model.LabelValue(exported), "service": "web"}, Value: model.SampleValue(v)}
	}
	_, _, note, err := OneClusterNoted([]model.Vector{{s("west", 2)}, {s("east", 1)}}, nil, "")
	const want = `the answers hold the series of 2 clusters ("east", "west"): a scrape without honor_labels: true (a federation's) renamed the series' own cluster label cluster to exported_cluster (e.g. {cluster="hub", exported_cluster="east", service="web"}), so cluster is the scrape target's and would read them as one cluster, their calls added; ` +
		`pick the cluster with --cluster (discover) or --prometheus-cluster (the manager), and name the label with --prometheus-cluster-label exported_cluster (so the graph reads it), or honor_labels: true on the federation's scrape job (so the series keep cluster)`
	if fmt.Sprint(err) != want || note != "" {
		t.Fatalf("two renamed clusters: %v, note %q\nwant %s", err, note, want)
	}
	out, other, note, err := OneClusterNoted([]model.Vector{{s("east", 1)}, {s("east", 3)}}, nil, "")
	const wantNote = `a scrape without honor_labels: true (a federation's) renamed the series' own cluster label cluster to exported_cluster: read as their cluster, cluster being the scrape target's; say so with --prometheus-cluster-label exported_cluster (so the graph reads it), or honor_labels: true on the federation's scrape job (so the series keep cluster)`
	if err != nil || note != wantNote || len(other) != 0 || len(out[0])+len(out[1]) != 2 {
		t.Fatalf("one renamed cluster: %v %v %v, note %q", out, other, err, note)
	}
	// A series of the hub itself (cluster only) and east's renamed: two clusters.
	hub := &model.Sample{Metric: model.Metric{"cluster": "hub", "service": "web"}, Value: 1}
	if _, _, _, err := OneClusterNoted([]model.Vector{{hub, s("east", 1)}}, nil, ""); err == nil || !strings.HasPrefix(err.Error(), `the answers hold the series of 2 clusters ("east", "hub")`) {
		t.Fatalf("the hub's own and east's: %v", err)
	}
	// Named as the cluster label, exported_cluster is read as any label (no renamed form of it).
	if _, _, note, err := OneClusterNoted([]model.Vector{{s("east", 1)}}, []string{"exported_cluster"}, ""); err != nil || note != "" {
		t.Fatalf("exported_cluster named: %v, note %q", err, note)
	}
}

func TestCheckClusterLabelsRenamed(t *testing.T) {
	const want = `cluster label "cluster": its renamed form "exported_cluster" (a federation without honor_labels: true writes a series' own cluster there) is a replica label (--prometheus-replica-label)`
	if err := CheckClusterLabels(nil, []string{"exported_cluster"}, ""); fmt.Sprint(err) != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if err := CheckClusterLabels([]string{"exported_cluster"}, []string{"cluster"}, ""); err != nil {
		t.Fatalf("exported_cluster as the cluster label: %v", err)
	}
}
