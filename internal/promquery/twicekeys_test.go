package promquery

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestKeyTwiceInTheAnswer: a key given twice in an object of the answer (a test server: no
// Prometheus, Thanos or Mimir writes one; a proxy that merges or rewrites answers might) is
// refused, naming the key and where: client_golang, like encoding/json, takes the last, so the
// answer read was not the one its first half said (before: `"status":"error"` then
// `"status":"success"` read as a success, a second "result" replaced the first's edges, a second
// "value" or label replaced the first, each without a word). Keys spelt with escapes are the
// same key.
func TestKeyTwiceInTheAnswer(t *testing.T) {
	const s1 = `{"metric":{"upstream":"payment"},"value":[1796213250,"3"]}`
	for _, tc := range []struct{ name, body, want string }{
		{"status", `{"status":"error","errorType":"bad_data","error":"x","status":"success","data":{"resultType":"vector","result":[]}}`,
			`the answer gives "status" twice in its object (which one counts is ambiguous: client_golang takes the last)`},
		{"data", `{"status":"success","data":{"resultType":"vector","result":[` + s1 + `]},"data":{"resultType":"vector","result":[]}}`,
			`the answer gives "data" twice in its object (which one counts is ambiguous: client_golang takes the last)`},
		{"result", `{"status":"success","data":{"resultType":"vector","result":[` + s1 + `],"result":[]}}`,
			`the answer gives "result" twice in its "data" (which one counts is ambiguous: client_golang takes the last)`},
		{"resultType", `{"status":"success","data":{"resultType":"matrix","resultType":"vector","result":[]}}`,
			`the answer gives "resultType" twice in its "data" (which one counts is ambiguous: client_golang takes the last)`},
		{"warnings", `{"status":"success","warnings":["partial"],"warnings":[],"data":{"resultType":"vector","result":[]}}`,
			`the answer gives "warnings" twice in its object (which one counts is ambiguous: client_golang takes the last)`},
		{"value", `{"status":"success","data":{"resultType":"vector","result":[` + s1 + `,{"metric":{"upstream":"cart"},"value":[1796213250,"9"],"value":[1796213250,"1"]}]}}`,
			`the answer gives "value" twice in series 2 (which one counts is ambiguous: client_golang takes the last)`},
		{"metric", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment"},"metric":{"upstream":"cart"},"value":[1796213250,"1"]}]}}`,
			`the answer gives "metric" twice in series 1 (which one counts is ambiguous: client_golang takes the last)`},
		{"a label", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment","service":"web","upstream":"cart"},"value":[1796213250,"1"]}]}}`,
			`the answer gives label "upstream" twice in series 1's "metric" (which one counts is ambiguous: client_golang takes the last)`},
		{"a label spelt with an escape", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment","\u0075pstream":"cart"},"value":[1796213250,"1"]}]}}`,
			`the answer gives label "upstream" twice in series 1's "metric" (which one counts is ambiguous: client_golang takes the last)`},
		{"a long label", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"` + strings.Repeat("l", 100) + `":"a","` + strings.Repeat("l", 100) + `":"b"},"value":[1796213250,"1"]}]}}`,
			`the answer gives label "` + strings.Repeat("l", 64) + `..." twice in series 1's "metric" (which one counts is ambiguous: client_golang takes the last)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := hostile(t, jsonAnswer(tc.body), Options{})
			_, err := c.query(context.Background(), testQ, time.Now())
			want := "query " + testQ + ": " + tc.want
			if errString(err) != want {
				t.Fatalf("got  %v\nwant %s", err, want)
			}
		})
	}
	// Keys that are not twice, in objects of the path and beside it, are read as before.
	for _, body := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1","b":"1","value":"1"},"value":[1796213250,"1"]},{"metric":{"a":"1","b":"2"},"value":[1796213250,"1"]}]}}`,
		`{"status":"success","x":1,"x":2,"data":{"y":[],"y":[],"resultType":"vector","result":[{"metric":{"a":{"b":1,"b":2}},"value":[1796213250,"1"]}]}}`,
	} {
		c, _ := hostile(t, jsonAnswer(body), Options{})
		if _, err := c.query(context.Background(), testQ, time.Now()); err != nil && !strings.Contains(err.Error(), "bad_response") {
			t.Errorf("%s: %v", body, err)
		}
	}
}
