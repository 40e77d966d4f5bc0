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

func TestCronJobOf(t *testing.T) {
	x := New()
	cj := workloadtest.Deployment("nightly", "payment=2")
	cj.Kind = workload.KindCronJob
	x.Put(cj)
	own := workloadtest.Deployment("nightly-20260101", "")
	own.Kind = workload.KindJob
	x.Put(own)
	x.SetJobCronJob("shop", "nightly-manual", "nightly")
	for job, want := range map[string]string{
		"nightly-29412345": "nightly", // by its name: the Job's event has not arrived
		"nightly-manual":   "nightly", // by its controller
		"nightly-20260101": "",        // a Job of its own, judged itself
		"nightly-other":    "",
		"report-29412345":  "", // no CronJob report
	} {
		got, ok := x.CronJobOf("shop", job)
		if got != want || ok != (want != "") {
			t.Errorf("CronJobOf(shop, %s) = %q, %v; want %q", job, got, ok, want)
		}
	}
	if _, ok := x.CronJobOf("other", "nightly-manual"); ok {
		t.Error("CronJobOf in another namespace = true")
	}
	x.SetJobCronJob("shop", "nightly-manual", "")
	if got, ok := x.CronJobOf("shop", "nightly-manual"); ok {
		t.Errorf("CronJobOf after the Job went = %q", got)
	}
}
