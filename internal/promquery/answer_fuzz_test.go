package promquery

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// answerMirror is a Prometheus query answer read with encoding/json, independently of
// client_golang: what the client took as a vector of counts must be one by this reading too.
type answerMirror struct {
	Status   string   `json:"status"`
	Warnings []string `json:"warnings"`
	Data     *struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []json.RawMessage `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// FuzzAnswer serves arbitrary bodies as Prometheus' answer (one loopback server for the run)
// and runs Series on them: never a panic, and an answer taken is a success with no warning whose
// data is a vector of counts (each value a number from 0 to 2^53, each label set once) by an
// independent reading with encoding/json: no false pass. go test runs the seeds and
// testdata/fuzz; go test -run '^$' -fuzz '^FuzzAnswer$' ./internal/promquery fuzzes.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		vector([2]string{`{"namespace":"shop","service":"web","upstream":"order"}`, "3"}),
		vector([2]string{`{"namespace":"shop","service":"web","envoy_cluster_name":"outbound|80||order.shop.svc.cluster.local"}`, "12.5"}, [2]string{`{"namespace":"shop","service":"web","parent_name":"order","parent_namespace":"shop"}`, "0"}),
		vector([2]string{`{"a":"1"}`, "NaN"}), vector([2]string{`{"a":"1"}`, "1"}, [2]string{`{"a":"1"}`, "1"}),
		vector([2]string{`{}`, "1"}), vector([2]string{`{"a":"1"}`, "9007199254740993"}), vector([2]string{`{"a":"1"}`, "0x1p4"}),
		`{"status":"success","data":{"resultType":"vector","result":[null]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]}]},"status":"error"}`,
		`{"STATUS":"success","data":{"resultType":"vector","result":[]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":["x","1"]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"\u0076alue":[1,"1","2"]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"}}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"histogram":[1796213250,{"count":"5","sum":"1"}]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"],"histogram":[1,{}]}]}}`,
		`{"status":"success","warnings":[],"data":{"resultType":"scalar","result":[1,"1"]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[]}} trailing`,
		`{"status":"error","errorType":"bad_data","error":""}`, `{}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	var body atomic.Pointer[[]byte]
	c, _ := hostile(f, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(*body.Load())
	}, Options{Timeout: 5 * time.Second, SeriesLimit: 50, MaxAnswerBytes: 1 << 16})
	now := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		body.Store(&b)
		checked, err := c.queryChecked(context.Background(), testQ, now)
		if err != nil {
			return
		}
		var m answerMirror
		if jerr := json.Unmarshal(b, &m); jerr != nil {
			t.Fatalf("%q taken as an answer (%d series); encoding/json: %v", b, len(checked.Vector()), jerr)
		}
		if m.Status != "success" || len(m.Warnings) > 0 || m.Data == nil || m.Data.ResultType != "vector" {
			t.Fatalf("%q taken as an answer (%d series): status %q, %d warnings, data %v", b, len(checked.Vector()), m.Status, len(m.Warnings), m.Data)
		}
		seen := map[string]float64{}
		for i, r := range m.Data.Result {
			if len(r.Value) != 2 { // a pair of one element read as the count 0 before pairs.go
				t.Fatalf("%q taken as an answer: series %d has a value of %d elements", b, i, len(r.Value))
			}
			var vs string
			if json.Unmarshal(r.Value[1], &vs) != nil {
				t.Fatalf("%q taken as an answer: series %d's value %s is not a string", b, i, r.Value[1])
			}
			v, perr := strconv.ParseFloat(vs, 64)
			if perr != nil || math.IsNaN(v) || v < 0 || v > MaxIncrease {
				t.Fatalf("%q taken as an answer: series %d's value %q is no count (%v)", b, i, vs, perr)
			}
			key := model.LabelSet{}
			for k, v := range r.Metric {
				key[model.LabelName(k)] = model.LabelValue(v)
			}
			// Twins (a series twice with one value) are taken once, by design (checkVector).
			if prev, ok := seen[key.String()]; ok && prev != v {
				t.Fatalf("%q taken as an answer: series %s twice, %v and %v", b, key, prev, v)
			}
			seen[key.String()] = v
		}
		for _, s := range checked.Vector() {
			if f := float64(s.Value); math.IsNaN(f) || f < 0 || f > MaxIncrease {
				t.Fatalf("%q: a value %v taken", b, f)
			}
		}
		if len(checked.Vector()) > len(m.Data.Result) {
			t.Fatalf("%q: %d series taken from %d", b, len(checked.Vector()), len(m.Data.Result))
		}
	})
}
