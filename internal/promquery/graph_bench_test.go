package promquery

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/telemetry"
)

// benchEdges is 20,000 Istio edges from both reporters: 40,000 series in one answer to the
// istio_requests_total query (telemetry's BenchmarkRead20000 at the client's level).
const benchEdges = 20000

func benchIstioAnswer() string { return istioAnswer(benchEdges) }

// istioAnswer is an istio_requests_total answer of edges edges, two series each.
func istioAnswer(edges int) string {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := range edges {
		for j, rep := range []string{"source", "destination"} {
			if i > 0 || j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"metric":{"reporter":%q,"source_workload":"s%05d","source_workload_namespace":"shop","destination_service_name":"s%05d","destination_service_namespace":"shop"},"value":[1796213250,"%d"]}`,
				rep, i, (i+1)%edges, 60*(j+1))
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
			v = append(v, &model.Sample{Value: model.SampleValue(60 * (j + 1)), Timestamp: 1796213250000, Metric: model.Metric{"reporter": model.LabelValue(rep),
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

// TestHundredThousandSeries: a poll whose istio_requests_total answer holds 100,000 series (50,000
// edges, both reporters; --prometheus-series-limit raised above them), 19 MB of JSON, is read
// whole, and the poll allocates less than 512 MiB in all, not all live at once (measured: 346
// MiB, about 3.5 KiB per series: the body, its decoding into labelled samples, the check and
// the edges); at the default limit (10,000) an answer that ignores the limit parameter (an old
// Prometheus, a look-alike) is refused, naming its series count.
func TestHundredThousandSeries(t *testing.T) {
	istio, empty := istioAnswer(50000), `{"status":"success","data":{"resultType":"vector","result":[]}}`
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
	t.Logf("answer: %d bytes", len(istio))
	c, err := New(Options{URL: srv.URL, Window: time.Minute, SeriesLimit: 100001})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ob, err := c.Graph(context.Background(), time.Now(), nil)
	runtime.ReadMemStats(&after)
	if err != nil || len(ob.Edges) != 50000 {
		t.Fatalf("%v edges, %v", ob, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("the poll allocated %d MiB", alloc>>20)
	if alloc > 512<<20 {
		t.Errorf("the poll allocated %d MiB for 100,000 series", alloc>>20)
	}
	c, err = New(Options{URL: srv.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Graph(context.Background(), time.Now(), nil)
	if want := "query " + telemetryFirstQuery(time.Minute) + ": 100000 series, over the limit (--prometheus-series-limit 10000): the edges would be incomplete"; errString(err) != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}
}
