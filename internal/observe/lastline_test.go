package observe

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestCutLastLine: the last line of a stream without its newline (a file copied, or a stream
// cut, while a line was written), cut at every byte, is never read as an attempt nor taken for
// another format: it is bad, or (cut before anything tells its format) skipped. Before: an
// ingress-nginx line cut inside its $req_id was 3 attempts of another key ("6d8e6f2c"), one
// cut before its upstream fields "not read" as nginx's Combined format, Istio's text line cut
// in its route name an attempt, and Istio's JSON line cut before "start_time" (its keys are in
// order) skipped as an application's line or "not read" as a JSON access log of another shape.
func TestCutLastLine(t *testing.T) {
	f, err := os.Open("testdata/istio-json.log")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	sc.Scan()
	istioJSON := sc.Text()
	f.Close()
	for _, tc := range []struct {
		name, line string
		attempts   int // of the whole line
		skipUnder  int // a cut shorter than this is skipped (nothing in it tells an access log yet)
		wholeBad   bool
	}{
		{"ingress-nginx", ingressLine("10.0.0.1:8080, 10.0.0.2:8080, 10.0.0.3:8080", "0, 0, 157", "0.004, 0.008, 0.010", "502, 502, 200", rid1), 3, 45, true},
		{"istio-text", `[2026-11-24T14:02:11.118Z] "POST /checkout?cart=88 HTTP/1.1" 503 URX via_upstream - "-" 412 91 170 - "-" "Go-http-client/1.1" "7c1a4b2e-93d0-9b41-a1f5-2f0d6e1c8a30" "checkout:8080" "10.44.2.17:8080" outbound|8080||checkout.shop.svc.cluster.local 10.44.1.23:35027 10.0.45.184:8080 10.44.1.23:51910 - default`, 1, 2, true},
		{"envoy-text", `[2026-11-24T14:06:00.000Z] "GET /catalog?page=2 HTTP/1.1" 503 UF 0 91 12 - "-" "curl/8.5.0" "5d4c3b2a-1908-4f7e-8d6c-5b4a39281706" "catalog.shop:8080" "10.44.4.2:8080"`, 1, 2, false},
		{"retrycap", rline(okTime, `,"idempotency_key":"k1"`), 1, 24, false},
		{"istio-json", istioJSON, 1, 44, false},
	} {
		for _, cri := range []string{"", "2026-12-01T10:00:00.123456789Z stdout F "} {
			for i := 1; i <= len(tc.line); i++ {
				in := cri + tc.line + "\n" + cri + tc.line[:i] // a whole line, then the cut one
				st, err := NewGrouper().Consume(strings.NewReader(in), Source{Name: "f"}, DefaultMaxLine)
				want := Stats{Lines: 2, Attempts: tc.attempts, ListedRetries: tc.attempts - 1}
				switch {
				case i < tc.skipUnder:
					want.Skipped = 1
				case i < len(tc.line) || tc.wholeBad:
					want.Bad = 1
				default:
					want.Attempts *= 2
					want.ListedRetries *= 2
				}
				st.FirstBad = ""
				if err != nil || st != want {
					t.Errorf("%s%s cut at %d of %d (%q): %+v %v, want %+v", cri[:min(len(cri), 1)], tc.name, i, len(tc.line), tc.line[max(0, i-20):i], st, err, want)
				}
			}
		}
	}
	// The reason, for the key's format.
	st, _ := NewGrouper().Consume(strings.NewReader(ingressLine("10.0.0.1:8080", "157", "0.004", "200", rid1[:8])), Source{Name: "f"}, DefaultMaxLine)
	if want := "f: line 1: the last line has no newline and ends in its $req_id, the key: cut while written? (not read: a cut key is another key)"; st.FirstBad != want {
		t.Errorf("got  %s\nwant %s", st.FirstBad, want)
	}
}
