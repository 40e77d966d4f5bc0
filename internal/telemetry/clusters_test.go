package telemetry

import (
	"fmt"
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
