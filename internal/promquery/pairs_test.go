package promquery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
)

// TestPairScannerSplitReads: the verdict does not depend on how the answer's bytes arrive (one
// read, or one byte a read), and nesting deeper than maxPairDepth keeps maxPairDepth frames.
func TestPairScannerSplitReads(t *testing.T) {
	deep := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `},"value":[1,"1"]},{"value":[1]}]}}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"good", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]}]}}`, ""},
		{"empty result", `{"status":"success","data":{"resultType":"vector","result":[]}}`, ""},
		{"a value key elsewhere", `{"value":[1],"data":{"value":[],"result":[{"metric":{"value":[1]},"value":[1,"2"]}]}}`, ""},
		{"a nested pair", `{"data":{"result":[{"value":[[1,2],"1"]}]}}`, ""},
		{"one element", `{"data":{"result":[{"value":[1,"1"]},{"value":[ 1 ]}]}}`, `series 2 of the answer: its "value" holds 1 element(s), want [time, value]: a count would be read where the answer holds none`},
		{"a quote and brackets in a string", `{"data":{"result":[{"metric":{"a":"\"],[\\"},"value":["x\"]"]}]}}`, `series 1 of the answer: its "value" holds 1 element(s), want [time, value]: a count would be read where the answer holds none`},
		{"deep nesting", deep, `series 2 of the answer: its "value" holds 1 element(s), want [time, value]: a count would be read where the answer holds none`},
	} {
		for _, step := range []int{len(tc.in), 1, 7} {
			var s pairScanner
			maxFrames := 0
			for i := 0; i < len(tc.in); i += step {
				s.feed([]byte(tc.in[i:min(i+step, len(tc.in))]))
				maxFrames = max(maxFrames, len(s.stack))
			}
			got := ""
			if s.bad != nil {
				got = s.bad.Error()
			}
			if got != tc.want {
				t.Errorf("%s, %d bytes a read:\n got %q\nwant %q", tc.name, step, got, tc.want)
			}
			if maxFrames > maxPairDepth {
				t.Errorf("%s: %d frames kept, bound %d", tc.name, maxFrames, maxPairDepth)
			}
		}
	}
}

// BenchmarkPairScan40000 is the pair check over the 40,000-series answer of BenchmarkGraph40000;
// BenchmarkDecode40000, its anchor, is client_golang's decoding of the same bytes into a vector
// (what every answer costs already).
func BenchmarkPairScan40000(b *testing.B) {
	body := []byte(benchIstioAnswer())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var s pairScanner
		for i := 0; i < len(body); i += 32 << 10 { // as boundedBody is read
			s.feed(body[i:min(i+32<<10, len(body))])
		}
		if s.bad != nil {
			b.Fatal(s.bad)
		}
	}
}

func BenchmarkDecode40000(b *testing.B) {
	body := []byte(benchIstioAnswer())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var a struct {
			Data struct {
				Result model.Vector `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &a); err != nil || len(a.Data.Result) != 2*benchEdges {
			b.Fatal(err, len(a.Data.Result))
		}
	}
}
