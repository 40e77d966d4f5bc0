package promquery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/telemetry"
)

// hostile serves h on loopback and returns a client of it (the queries' input under test is
// the HTTP answer itself, so a test server stands in for a broken Prometheus or what sits in
// front of it).
func hostile(t testing.TB, h http.HandlerFunc, o Options) (*Client, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, srv.URL
}

func jsonAnswer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// vector is a success answer with these series ("{labels}", "value" as Prometheus writes it).
func vector(series ...[2]string) string {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i, s := range series {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"metric":%s,"value":[1796213250,"%s"]}`, s[0], s[1])
	}
	b.WriteString(`]}}`)
	return b.String()
}

const testQ = "sum(up)"

// TestHostileAnswers: every answer that is not a vector of counts is an error naming what it
// got (before: a 200 without data panicked, and so did a null series; a 200 "status: error"
// without a message read ": "; warnings of a partial answer, NaN, +Inf, -1, 1e308 and a series
// twice were taken as data; HTML from a login page read as a JSON syntax error).
func TestHostileAnswers(t *testing.T) {
	const orderLabels = `{"namespace":"shop","service":"order","upstream":"payment"}`
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want string // the error after "query sum(up): "
	}{
		{"not JSON", jsonAnswer("<<garbage>>"), "bad_response: invalid character '<' looking for beginning of value"},
		{"truncated JSON", jsonAnswer(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{}`), "bad_response: unexpected end of JSON input"},
		{"status error", jsonAnswer(`{"status":"error","errorType":"execution","error":"query timed out in expression evaluation"}`), "execution: query timed out in expression evaluation"},
		{"status error without a message", jsonAnswer(`{"status":"error"}`), `the answer says "status": "error" without an errorType or an error message`},
		{"success without data", jsonAnswer(`{"status":"success"}`), "the answer has no result (no data.resultType and data.result)"},
		{"data null", jsonAnswer(`{"status":"success","data":null}`), "the answer has no result (no data.resultType and data.result)"},
		{"a matrix", jsonAnswer(`{"status":"success","data":{"resultType":"matrix","result":[]}}`), "got a matrix, want a vector"},
		{"unknown result type", jsonAnswer(`{"status":"success","data":{"resultType":"histogram","result":[]}}`), `bad_response: unknown value type "histogram"`},
		{"partial answer", jsonAnswer(`{"status":"success","warnings":["partial response: store 10.0.0.7:10901 unavailable"],"data":{"resultType":"vector","result":[]}}`),
			"Prometheus answered with 1 warning(s), a partial answer whose edges would be incomplete: partial response: store 10.0.0.7:10901 unavailable"},
		{"NaN", jsonAnswer(vector([2]string{orderLabels, "NaN"})),
			`series {namespace="shop", service="order", upstream="payment"}: value NaN is not a counter's increase (want a number from 0 to 2^53)`},
		{"+Inf", jsonAnswer(vector([2]string{orderLabels, "+Inf"})),
			`series {namespace="shop", service="order", upstream="payment"}: value +Inf is not a counter's increase (want a number from 0 to 2^53)`},
		{"-1", jsonAnswer(vector([2]string{orderLabels, "-1"})),
			`series {namespace="shop", service="order", upstream="payment"}: value -1 is not a counter's increase (want a number from 0 to 2^53)`},
		{"1e308", jsonAnswer(vector([2]string{orderLabels, "1e308"})),
			`series {namespace="shop", service="order", upstream="payment"}: value 1e+308 is not a counter's increase (want a number from 0 to 2^53)`},
		{"a series twice", jsonAnswer(vector([2]string{orderLabels, "3"}, [2]string{`{"upstream":"payment","service":"order","namespace":"shop"}`, "4"})),
			`series {namespace="shop", service="order", upstream="payment"}: in the answer twice, with values 3 and 4 (an aggregation gives each label set once)`},
		{"a series twice with one value", jsonAnswer(vector([2]string{orderLabels, "3"}, [2]string{`{"namespace":"shop","upstream":"payment","service":"order"}`, "3"})),
			`series {namespace="shop", service="order", upstream="payment"}: in the answer twice, with values 3 and 3 (an aggregation gives each label set once)`},
		{"an empty series", jsonAnswer(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment"},"value":[1796213250,"1"]},null]}}`),
			"series 2 of the answer is empty (no labels, no value)"},
		{"hostile label values are named quoted", jsonAnswer(vector([2]string{`{"service":"a\"} or vector(1) #\n{x}","upstream":"ü"}`, "NaN"})),
			`series {service="a\"} or vector(1) #\n{x}", upstream="ü"}: value NaN is not a counter's increase (want a number from 0 to 2^53)`},
		// Pinned as found in session 12 (already refused, each naming what it got):
		{"-Inf", jsonAnswer(vector([2]string{orderLabels, "-Inf"})),
			`series {namespace="shop", service="order", upstream="payment"}: value -Inf is not a counter's increase (want a number from 0 to 2^53)`},
		{"a value that does not parse", jsonAnswer(vector([2]string{orderLabels, "abc"})),
			`bad_response: model.Vector: unmarshalerDecoder: strconv.ParseFloat: parsing "abc": invalid syntax, error found in #10 byte of ...|50,"abc"]}]|..., bigger context ...|,"upstream":"payment"},"value":[1796213250,"abc"]}]|...`},
		{"a scalar", jsonAnswer(`{"status":"success","data":{"resultType":"scalar","result":[1796213250,"1"]}}`), "got a scalar, want a vector"},
		{"a string", jsonAnswer(`{"status":"success","data":{"resultType":"string","result":[1796213250,"x"]}}`), `bad_response: unexpected value type "string"`},
		{"warnings and infos", jsonAnswer(`{"status":"success","warnings":["w1"],"infos":["i1"],"data":{"resultType":"vector","result":[]}}`),
			"Prometheus answered with 1 warning(s), a partial answer whose edges would be incomplete: w1"},
		{"HTTP 422 execution (--query.max-samples)", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}`)
		}, "execution: query processing would load too many samples into memory in query execution"},
		{"HTTP 400 bad_data", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:9: parse error"}`)
		}, `bad_data: invalid parameter "query": 1:9: parse error`},
		{"HTTP 503 timeout from a querier", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`)
		}, "HTTP 503 Service Unavailable: Prometheus gave up on the query: timeout: query timed out in expression evaluation (its --query.timeout, or --prometheus-timeout 10s if shorter, bounds the evaluation)"},
		{"an empty 200", jsonAnswer(""), "bad_response: unexpected end of JSON input"},
		// Found in session 12 (before: each read as an answer; a series without a value as an
		// increase of 0, its edge not observed):
		{"a status that is not success", jsonAnswer(`{"status":"partial","data":{"resultType":"vector","result":[]}}`),
			`the answer's "status" is "partial", want "success" or "error" (not Prometheus' query API?)`},
		{"no status", jsonAnswer(`{"data":{"resultType":"vector","result":[]}}`),
			`the answer's "status" is "", want "success" or "error" (not Prometheus' query API?)`},
		{"a partial answer flagged isPartial", jsonAnswer(`{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}}`),
			`the answer says "isPartial": true, a partial answer whose edges would be incomplete (a querier missing some of its stores)`},
		{"isPartial not first", jsonAnswer(`{"data":{"resultType":"vector","result":[]},"isPartial":true,"status":"success"}`),
			`the answer says "isPartial": true, a partial answer whose edges would be incomplete (a querier missing some of its stores)`},
		{"a series without a value", jsonAnswer(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment"}}]}}`),
			`series {upstream="payment"}: no value (no "value" in the answer's series)`},
		{"a pair of one element", jsonAnswer(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment"},"value":[1796213250,"2"]},{"metric":{"upstream":"order"},"value":[1796213250]}]}}`),
			`series 2 of the answer: its "value" holds 1 element(s), want [time, value]: a count would be read where the answer holds none`},
		{"a pair of three elements", jsonAnswer(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment"},"value":[1796213250,"1","9"]}]}}`),
			`series 1 of the answer: its "value" holds 3 element(s), want [time, value]: a count would be read where the answer holds none`},
		{"an empty pair under an escaped key", jsonAnswer(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"a\"],\"value\":[1,\"1\"]"}, "\u0076alue" : [ ]}]}}`),
			`series 1 of the answer: its "value" holds 0 element(s), want [time, value]: a count would be read where the answer holds none`},
		{"a native histogram", jsonAnswer(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"upstream":"payment"},"histogram":[1796213250,{"count":"1","sum":"1"}]}]}}`),
			`series {upstream="payment"}: a native histogram, not a counter's increase`},
		{"HTML login page", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!DOCTYPE html><html><title>Sign in</title></html>")
		}, `HTTP 200 from %URL%/api/v1/query with Content-Type "text/html; charset=utf-8", not Prometheus' JSON (a login page or a proxy in front of Prometheus?): the answer begins "<!DOCTYPE html><html><title>Sign in</title></html>"`},
		{"redirect to a login page", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/login" {
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html>Sign in</html>")
				return
			}
			http.Redirect(w, r, "/login?next=%2Fapi", http.StatusFound)
		}, `HTTP 200 from %URL%/login?next=xxxxx with Content-Type "text/html", not Prometheus' JSON (a login page or a proxy in front of Prometheus?): the answer begins "<html>Sign in</html>"`},
		{"no Content-Type", func(w http.ResponseWriter, _ *http.Request) {
			w.Header()["Content-Type"] = nil
			io.WriteString(w, vector())
		}, `HTTP 200 from %URL%/api/v1/query with Content-Type "", not Prometheus' JSON (a login page or a proxy in front of Prometheus?): the answer begins "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}"`},
		{"HTTP 502 from a proxy", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>Bad Gateway</html>")
		}, `HTTP 502 Bad Gateway: server_error: server error: 502: the answer begins "<html>Bad Gateway</html>"`},
		// What proxies and queriers in front of Prometheus answer: the body says who and why.
		{"HTTP 503 from Envoy", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "no healthy upstream")
		}, `HTTP 503 Service Unavailable: server_error: server error: 503: the answer begins "no healthy upstream"`},
		{"HTTP 429 from a querier", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "too many outstanding requests\n")
		}, `HTTP 429 Too Many Requests: client_error: client error: 429: the answer begins "too many outstanding requests"`},
		{"HTTP 504 from an ingress", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusGatewayTimeout)
			io.WriteString(w, "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
		}, `HTTP 504 Gateway Timeout: server_error: server error: 504: the answer begins "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><c"`}, // 120 bytes
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, url := hostile(t, tc.h, Options{})
			_, err := c.query(context.Background(), testQ, time.Now())
			want := "query " + testQ + ": " + strings.ReplaceAll(tc.want, "%URL%", url)
			if err == nil || err.Error() != want {
				t.Fatalf("got  %v\nwant %s", err, want)
			}
		})
	}
}

// TestHostileValuesFailTheStatusQueries: the same refusal on both readers' paths, so a NaN
// never reaches the observed amplification (where NaN > computed is false: a false pass) nor
// the graph.
func TestHostileValuesFailTheStatusQueries(t *testing.T) {
	c, _ := hostile(t, jsonAnswer(vector([2]string{`{"namespace":"shop","service":"order","upstream":"payment"}`, "NaN"})), Options{})
	if _, err := c.Series(context.Background(), time.Now()); err == nil || !strings.HasSuffix(err.Error(), "value NaN is not a counter's increase (want a number from 0 to 2^53)") {
		t.Errorf("Series: %v", err)
	}
	if _, err := c.Graph(context.Background(), time.Now(), nil); err == nil || !strings.HasSuffix(err.Error(), "value NaN is not a counter's increase (want a number from 0 to 2^53)") {
		t.Errorf("Graph: %v", err)
	}
}

// TestHostileLabelValuesPassThrough: label values with quotes, newlines, braces and UTF-8 are
// data, carried as written (no query interpolates them: the queries hold only the window and
// the validated caller label), and the graph's warnings quote them.
func TestHostileLabelValuesPassThrough(t *testing.T) {
	odd := `we\"ird} or vector(1) #\nü`
	c, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Form.Get("query"), "retrycap_proxy_requests_total") {
			io.WriteString(w, vector([2]string{`{"service":"` + odd + `","upstream":"payment"}`, "5"}))
			return
		}
		io.WriteString(w, vector())
	}, Options{Window: time.Minute})
	ob, err := c.Graph(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `retrycap: no namespace or no service label (the scrape adds them: docs/observe.md): not an edge: 1 series (e.g. {service="we\"ird} or vector(1) #\nü", upstream="payment"})`
	if len(ob.Warnings) != 1 || ob.Warnings[0] != want || len(ob.Edges) != 0 {
		t.Fatalf("warnings %q edges %v\nwant %q", ob.Warnings, ob.Edges, want)
	}
	for _, q := range telemetry.Queries(time.Minute, "service") {
		if strings.Contains(q.PromQL, "we") {
			t.Fatalf("a label value in a query: %s", q.PromQL)
		}
	}
}

// endless streams a JSON answer that never ends (series after series), counting what it wrote;
// it stops when the client goes away.
func endless(written *atomic.Int64, declare int64) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if declare > 0 {
			w.Header().Set("Content-Length", fmt.Sprint(declare))
		}
		chunk := []byte(strings.Repeat(`{"metric":{"namespace":"shop","service":"order","upstream":"payment"},"value":[1796213250,"1"]},`, 1000))
		n, err := io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`)
		written.Add(int64(n))
		for err == nil && written.Load() < 200<<20 {
			n, err = w.Write(chunk)
			written.Add(int64(n))
		}
	}
}

// TestHugeAnswerIsBounded: an answer over the bound (here 1 MiB; 64 MiB by default) is refused
// once the bound is read, and the client's memory does not grow with the answer: a server
// streaming series without end (millions of series: an old Prometheus ignoring the limit
// parameter) has written at most a few MiB past the bound (the socket buffers) when the
// client stops, and the query allocated less than 8 MiB in all.
func TestHugeAnswerIsBounded(t *testing.T) {
	var written atomic.Int64
	c, _ := hostile(t, endless(&written, 0), Options{MaxAnswerBytes: 1 << 20})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := c.query(context.Background(), testQ, time.Now())
	runtime.ReadMemStats(&after)
	want := "query sum(up): " + tooLarge(1<<20, "1Mi")
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("server wrote %d bytes; the query allocated %d bytes", written.Load(), alloc)
	if alloc > 8<<20 {
		t.Errorf("the query allocated %d bytes for a 1 MiB bound", alloc)
	}
	if w := written.Load(); w > 32<<20 {
		t.Errorf("the server wrote %d bytes: the client kept reading past the bound", w)
	}

	// A Content-Length over the bound is refused before the body is read.
	var w2 atomic.Int64
	c, url := hostile(t, endless(&w2, 100<<20), Options{MaxAnswerBytes: 1 << 20})
	_, err = c.query(context.Background(), testQ, time.Now())
	want = "query sum(up): HTTP 200 from " + url + "/api/v1/query: Content-Length 104857600: " + tooLarge(1<<20, "1Mi")
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// TestHugeErrorAnswerIsBounded: an error answer (a proxy's 503) whose body does not end is
// bounded like a success's (before: client_golang read it whole for its message, as much as
// the server sent within the timeout).
func TestHugeErrorAnswerIsBounded(t *testing.T) {
	var written atomic.Int64
	c, _ := hostile(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		chunk := []byte(strings.Repeat("upstream connect error or disconnect/reset before headers. ", 1000))
		var err error
		for err == nil && written.Load() < 200<<20 {
			var n int
			n, err = w.Write(chunk)
			written.Add(int64(n))
		}
	}, Options{MaxAnswerBytes: 1 << 20})
	_, err := c.query(context.Background(), testQ, time.Now())
	want := "query sum(up): HTTP 503 Service Unavailable: the error answer is over 1048576 bytes, the bound on one answer (--prometheus-max-answer-size 1Mi): refused, not read further (a proxy in front of Prometheus?)"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	if w := written.Load(); w > 32<<20 {
		t.Errorf("the server wrote %d bytes: the client kept reading past the bound", w)
	}
}

// TestSlowAnswers: a Prometheus that accepts and never answers, and one that sends its headers
// and then drips its body, both end at the timeout with an error.
func TestSlowAnswers(t *testing.T) {
	// The handlers hold until the test ends (a server's request context is not cancelled while
	// the handler has not read the request body), so that the server can close.
	for _, tc := range []struct {
		name, want string
		h          func(stop chan struct{}) http.HandlerFunc
	}{
		{"no answer", "query sum(up): no whole answer within 300ms (--prometheus-timeout): context deadline exceeded", func(stop chan struct{}) http.HandlerFunc {
			return func(_ http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-stop:
				}
			}
		}},
		{"a dripping body", "query sum(up): no whole answer within 300ms (--prometheus-timeout): context deadline exceeded", func(stop chan struct{}) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"status":"success",`)
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-stop:
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			c, _ := hostile(t, tc.h(stop), Options{Timeout: 300 * time.Millisecond})
			t.Cleanup(func() { close(stop) }) // runs before the server's Close
			start := time.Now()
			_, err := c.query(context.Background(), testQ, time.Now())
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v for a 300ms timeout", d)
			}
		})
	}
}

// TestRedirectToAnotherHost: an auth proxy (something in front of Prometheus, so a test server)
// that redirects the query to another host is not followed: the message names both URLs and
// why (prometheus/common does not send the credentials to another host, so the other host's
// 401 read "its credentials are missing or wrong", about credentials that are right; without
// credentials it queried a server nobody configured). A redirect on the same host (a path
// prefix added, a login page) is followed as before (TestHostileAnswers).
func TestRedirectToAnotherHost(t *testing.T) {
	var sawAuth atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawAuth.Store(true)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "Unauthorized")
	}))
	t.Cleanup(other.Close)
	// localhost is another host than 127.0.0.1 to a client, on the same loopback listener.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	pw := writeFile(t, "pw", "s3cret")
	for _, auth := range []Auth{{Username: "admin", PasswordFile: pw}, {}} {
		c, url := hostile(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
		}, Options{Auth: auth})
		_, err := c.query(context.Background(), testQ, time.Now())
		want := "query " + testQ + ": HTTP 307 from " + url + "/api/v1/query: redirected to " + otherURL + "/api/v1/query, another host: not followed (the credentials and the query are for --prometheus-url's host; give that URL as --prometheus-url if it is Prometheus)"
		if errString(err) != want {
			t.Errorf("%+v:\n got %v\nwant %s", auth, err, want)
		}
	}
	if sawAuth.Load() {
		t.Error("the other host was sent the credentials")
	}
}

// TestInfosAreRead: infos ("metric might not be a counter") do not cut an answer, unlike
// warnings: the answer is read.
func TestInfosAreRead(t *testing.T) {
	// and "isPartial": false is a whole answer.
	c0, _ := hostile(t, jsonAnswer(`{"status":"success","isPartial":false,"data":{"resultType":"vector","result":[]}}`), Options{})
	if _, err := c0.query(context.Background(), testQ, time.Now()); err != nil {
		t.Fatal(err)
	}
	c, _ := hostile(t, jsonAnswer(`{"status":"success","infos":["PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket"],"data":{"resultType":"vector","result":[{"metric":{"upstream":"payment"},"value":[1796213250,"3"]}]}}`), Options{})
	v, err := c.query(context.Background(), testQ, time.Now())
	if err != nil || len(v) != 1 || v[0].Value != 3 {
		t.Fatalf("got %v %v", v, err)
	}
}
