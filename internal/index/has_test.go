package index

import (
	"testing"

	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

func TestHas(t *testing.T) {
	x := New()
	cj := workloadtest.Deployment("nightly", "payment=2")
	cj.Kind = workload.KindCronJob
	x.Put(cj)
	for _, tc := range []struct {
		kind, ns, name string
		want           bool
	}{
		{workload.KindCronJob, cj.Namespace, "nightly", true},
		{workload.KindJob, cj.Namespace, "nightly", false},
		{workload.KindCronJob, "other", "nightly", false},
		{workload.KindCronJob, cj.Namespace, "nightly-29412345", false},
	} {
		if got := x.Has(tc.kind, tc.ns, tc.name); got != tc.want {
			t.Errorf("Has(%s, %s, %s) = %v, want %v", tc.kind, tc.ns, tc.name, got, tc.want)
		}
	}
	x.Remove(cj)
	if x.Has(workload.KindCronJob, cj.Namespace, "nightly") {
		t.Errorf("Has after Remove = true")
	}
}
