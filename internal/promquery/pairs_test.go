package promquery

import (
	"strings"
	"testing"
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
