package forward

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"
)

// One call's policy work without the network, with and without the
// caller's Retrycap-Deadline (issue 29: the header within 3 % of the
// proxy's throughput): Begin, the attempt's headers, the outcome of a 200,
// End. The request is parsed once; each pass restores its budget and
// deadline headers to what the app sent (the exchange rewrote them).
func BenchmarkExchange(b *testing.B) { benchExchange(b, "") }

func BenchmarkExchangeDeadline(b *testing.B) { benchExchange(b, "5000") }

func benchExchange(b *testing.B, deadline string) {
	f := New(testConfig(), nil)
	up := f.Match([]byte("backend"))
	if up == nil {
		b.Fatal("no upstream backend")
	}
	raw := benchRequest
	if deadline != "" {
		raw = raw[:len(raw)-2] + "Retrycap-Deadline: " + deadline + "\r\n\r\n"
	}
	var req fasthttp.Request
	if err := req.Header.Read(bufio.NewReader(bytes.NewReader([]byte(raw)))); err != nil {
		b.Fatal(err)
	}
	var resp fasthttp.Response
	sc := &Scratch{}
	var x Exchange
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Header.Set("Retrycap-Budget", "3")
		if deadline != "" {
			req.Header.Set("Retrycap-Deadline", deadline)
		}
		seen := ScanRequestHeaders(&req.Header)
		if !x.Begin(f, up, &req, &resp, seen, sc) || !x.NextAttempt() {
			b.Fatalf("refused: %d %s", resp.StatusCode(), resp.Body())
		}
		resp.SetStatusCode(fasthttp.StatusOK)
		if retry, _ := x.AfterAttempt(nil); retry {
			b.Fatal("a 200 retried")
		}
		x.End()
	}
	b.StopTimer()
	if deadline != "" {
		if v := req.Header.Peek("Retrycap-Deadline"); len(v) != 4 || v[0] != '4' && v[0] != '5' {
			b.Fatalf("forwarded Retrycap-Deadline %q, want the 5000 ms reduced", v)
		}
	}
}
