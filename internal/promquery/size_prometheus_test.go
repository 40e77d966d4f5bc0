package promquery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
)

// TestMaxAnswerSizeAgainstPrometheus: the bound against a real Prometheus' answer, which it
// compresses (gzip, undone by Go's transport: the bound is on the answer as read, the memory
// it takes). 300 counters that never increase make an answer whose bytes do not change between
// two queries at the same whole second (each value "0", each timestamp that second): at a bound
// of exactly its size it is read whole, one byte under it is refused naming the flag.
func TestMaxAnswerSizeAgainstPrometheus(t *testing.T) {
	const n = 300
	var exposition strings.Builder
	exposition.WriteString("# TYPE retrycap_proxy_requests_total counter\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&exposition, "retrycap_proxy_requests_total{code=\"200\",upstream=\"upstream-%03d\"} 7\n", i)
	}
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, exposition.String())
	}))
	t.Cleanup(exporter.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exporter.URL, "http://"), Labels: map[string]string{"namespace": "shop", "service": "order"}}})

	const q = "sum by (namespace, service, upstream, prometheus_replica) (increase(retrycap_proxy_requests_total[1m]))"
	big, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var at time.Time // a whole second at which every series has an increase
	eventually(t, 60*time.Second, "an increase of every series", func() (bool, string) {
		at = time.Now().Truncate(time.Second)
		v, err := big.query(context.Background(), q, at)
		return err == nil && len(v) == n, fmt.Sprintf("%d series, %v", len(v), err)
	})

	// The answer's size as Prometheus writes it, and on the wire.
	raw := func(gzip bool) (int, string) {
		u := prom.URL + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport then leaves it compressed
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return len(b), resp.Header.Get("Content-Encoding")
	}
	size, enc := raw(false)
	wire, wireEnc := raw(true)
	t.Logf("the answer: %d bytes (%q); on the wire with gzip: %d bytes (%q)", size, enc, wire, wireEnc)
	if enc != "" || wireEnc != "gzip" || wire >= size {
		t.Fatalf("Prometheus did not compress as expected: %d bytes %q, %d bytes %q", size, enc, wire, wireEnc)
	}

	at1, err := New(Options{URL: prom.URL, Window: time.Minute, MaxAnswerBytes: int64(size)})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := at1.query(context.Background(), q, at); err != nil || len(v) != n {
		t.Fatalf("at a bound of exactly the answer's %d bytes: %d series, %v", size, len(v), err)
	}
	under, err := New(Options{URL: prom.URL, Window: time.Minute, MaxAnswerBytes: int64(size - 1)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = under.query(context.Background(), q, at)
	want := "query " + q + ": " + tooLarge(int64(size-1), strconv.Itoa(size-1))
	if err == nil || err.Error() != want {
		t.Fatalf("one byte under the answer's %d bytes:\ngot  %v\nwant %s", size, err, want)
	}
}
