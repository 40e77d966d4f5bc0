package promquery

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/telemetry"
)

// benchEdges is 20,000 Istio edges from both reporters: 40,000 series in one answer to the
// istio_requests_total query (telemetry's BenchmarkRead20000 at the client's level).
const benchEdges = 20000

func benchIstioAnswer() string {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := range benchEdges {
		for j, rep := range []string{"source", "destination"} {
			if i > 0 || j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"metric":{"reporter":%q,"source_workload":"s%05d","source_workload_namespace":"shop","destination_service_name":"s%05d","destination_service_namespace":"shop"},"value":[1796213250,"%d"]}`,
				rep, i, (i+1)%benchEdges, 60*(j+1))
		}
	}
	b.WriteString(`]}}`)
	return b.String()
}

// BenchmarkGraph40000 is one poll's graph: telemetry.Queries against a loopback Prometheus whose
// istio_requests_total answer holds 40,000 series (the others none), decoded, checked and read.
func BenchmarkGraph40000(b *testing.B) {
	istio, empty := benchIstioAnswer(), `{"status":"success","data":{"resultType":"vector","result":[]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Form.Get("query"), "istio_requests_total[") {
			w.Write([]byte(istio))
			return
		}
		w.Write([]byte(empty))
	}))
	defer srv.Close()
	c, err := New(Options{URL: srv.URL, Window: time.Minute, SeriesLimit: 100000})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ob, err := c.Graph(context.Background(), time.Now(), nil)
		if err != nil || len(ob.Edges) != benchEdges {
			b.Fatalf("%v edges, %v", len(ob.Edges), err)
		}
	}
}

// BenchmarkCheckRead40000 is the same answer from the decoded vector on: the check and Read,
// without the HTTP and the JSON.
func BenchmarkCheckRead40000(b *testing.B) {
	var v model.Vector
	for i := range benchEdges {
		for j, rep := range []string{"source", "destination"} {
			v = append(v, &model.Sample{Value: model.SampleValue(60 * (j + 1)), Metric: model.Metric{"reporter": model.LabelValue(rep),
				"source_workload": model.LabelValue(fmt.Sprintf("s%05d", i)), "source_workload_namespace": "shop",
				"destination_service_name": model.LabelValue(fmt.Sprintf("s%05d", (i+1)%benchEdges)), "destination_service_namespace": "shop"}})
		}
	}
	q := telemetry.Queries(time.Minute, "service")[0]
	b.ReportAllocs()
	for b.Loop() {
		checked, err := checkVector(v)
		if err != nil {
			b.Fatal(err)
		}
		ob, err := telemetry.Read([]telemetry.Answer{telemetry.CheckedAnswer(q, checked)}, telemetry.Options{Window: time.Minute})
		if err != nil || len(ob.Edges) != benchEdges {
			b.Fatalf("%v edges, %v", len(ob.Edges), err)
		}
	}
}
