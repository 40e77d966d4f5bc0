package forward

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// StreamEnd, as both engines drive it: an answer passed on whose body streams has its line
// written at Done (once, with the cut and the bytes), and its cut counted by who made it; an
// answer being retried is logged at once and has no StreamEnd; without the log the cut is still
// counted.
func TestStreamEnd(t *testing.T) {
	ro, err := policy.ParseRetryOn("reset,503")
	if err != nil {
		t.Fatal(err)
	}
	newExchange := func(t *testing.T, log bool) (*Forwarder, *Exchange, *fasthttp.Response, *cancelLogBuf, *accesslog.Writer) {
		f := New(&Config{
			Upstreams: []UpstreamConfig{{Name: "svc", Attempts: 3}}, PerTryTimeout: time.Second,
			RetryOn: ro, RetryMethods: []string{"GET"}, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond,
			BudgetPercent: 100, BudgetMinPerSecond: 100, BudgetWindow: 10 * time.Second,
		}, nil)
		out := &cancelLogBuf{}
		var w *accesslog.Writer
		if log {
			w = accesslog.New("client", out, 0)
			f.EnableAccessLog(w)
		}
		req, resp := &fasthttp.Request{}, &fasthttp.Response{}
		req.SetRequestURI("http://svc/x")
		req.Header.SetHost("svc")
		x := &Exchange{}
		if !x.Begin(f, f.Upstreams[0], req, resp, ScanRequestHeaders(&req.Header), &Scratch{}) || !x.NextAttempt() {
			t.Fatalf("no attempt: %d %s", resp.StatusCode(), resp.Body())
		}
		return f, x, resp, out, w
	}
	lines := func(t *testing.T, w *accesslog.Writer, out *cancelLogBuf) []string {
		t.Helper()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var ls []string
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if l != "" {
				_, tail, _ := strings.Cut(durationField.ReplaceAllString(l, ""), `"status":`)
				ls = append(ls, tail)
			}
		}
		return ls
	}

	t.Run("passed on, cut by the upstream", func(t *testing.T) {
		f, x, resp, out, w := newExchange(t, true)
		resp.SetStatusCode(200)
		x.Streams()
		if retry, _ := x.AfterAttempt(nil); retry {
			t.Fatal("a 200 retried")
		}
		end := x.StreamEnd()
		x.End()
		if end == nil || w.Written() != 0 {
			t.Fatalf("StreamEnd %v, %d lines written before the body's end; want one, none", end, w.Written())
		}
		end.Done(CutUpstream, 50000)
		end.Done(CutClient, 1) // once only
		if got := lines(t, w, out); len(got) != 1 || got[0] != `200,"cut":"upstream","body_bytes":50000}` {
			t.Errorf("lines %q, want one 200 cut by the upstream after 50000 bytes", got)
		}
		up := f.Upstreams[0].M
		if a, b, c := testutil.ToFloat64(up.CutByUpstream), testutil.ToFloat64(up.CutByClient), testutil.ToFloat64(up.CutByProxy); a != 1 || b != 0 || c != 0 {
			t.Errorf("cuts by upstream, client, proxy: %v, %v, %v; want 1, 0, 0", a, b, c)
		}
	})
	t.Run("passed on, whole", func(t *testing.T) {
		f, x, resp, out, w := newExchange(t, true)
		resp.SetStatusCode(200)
		x.Streams()
		_, _ = x.AfterAttempt(nil)
		x.StreamEnd().Done("", 70000)
		if got := lines(t, w, out); len(got) != 1 || got[0] != `200}` {
			t.Errorf("lines %q, want one 200 without a cut", got)
		}
		up := f.Upstreams[0].M
		if n := testutil.ToFloat64(up.CutByUpstream) + testutil.ToFloat64(up.CutByClient) + testutil.ToFloat64(up.CutByProxy); n != 0 {
			t.Errorf("%v cuts counted, want 0", n)
		}
	})
	t.Run("retried: logged at once, no StreamEnd", func(t *testing.T) {
		_, x, resp, out, w := newExchange(t, true)
		resp.SetStatusCode(503)
		x.Streams()
		if retry, _ := x.AfterAttempt(nil); !retry {
			t.Fatal("a GET's 503 not retried")
		}
		if x.StreamEnd() != nil {
			t.Fatal("a StreamEnd for an answer being retried")
		}
		x.Waited()
		if !x.NextAttempt() {
			t.Fatal("no second attempt")
		}
		resp.SetStatusCode(200)
		_, _ = x.AfterAttempt(nil) // not told it streams: logged at once
		if x.StreamEnd() != nil {
			t.Fatal("a StreamEnd for an answer not said to stream")
		}
		if got := lines(t, w, out); len(got) != 2 || got[0] != `503}` || got[1] != `200}` {
			t.Errorf("lines %q, want the 503 and the 200, no cut", got)
		}
	})
	t.Run("no access log: counted", func(t *testing.T) {
		f, x, resp, _, _ := newExchange(t, false)
		resp.SetStatusCode(200)
		x.Streams()
		_, _ = x.AfterAttempt(nil)
		x.StreamEnd().Done(CutProxy, 0)
		if n := testutil.ToFloat64(f.Upstreams[0].M.CutByProxy); n != 1 {
			t.Errorf("%v cuts by the proxy, want 1", n)
		}
	})
}

// durationField is a line's duration, left out of the comparisons.
var durationField = regexp.MustCompile(`,"duration_us":[0-9]+`)
