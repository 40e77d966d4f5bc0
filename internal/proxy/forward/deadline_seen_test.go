package forward

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Begin looks Retrycap-Deadline up only when the one-pass scan saw the
// name: for every spelling and repetition it must read the deadline that
// looking it up unconditionally (SeenAll) reads, and forward the same
// header.
func TestDeadlineSeenMatchesFullLookup(t *testing.T) {
	f := New(testConfig(), nil)
	up := f.Match([]byte("backend"))
	for _, c := range []struct {
		head string
		seen bool
		want time.Duration // the deadline read; 0: none
	}{
		{"", false, 0},
		{"Retrycap-Deadline: 5000\r\n", true, 5 * time.Second},
		{"retrycap-deadline: 700\r\n", true, 700 * time.Millisecond},
		{"RETRYCAP-DEADLINE: 800\r\nX-A: 1\r\n", true, 800 * time.Millisecond},
		{"Retrycap-Deadline: 900\r\nretrycap-deadline: 600\r\n", true, 600 * time.Millisecond},
		{"Retrycap-Deadline: soon\r\n", true, 0},
		{"Retrycap-Deadlines: 100\r\nX-Retrycap-Deadline: 100\r\n", false, 0},
	} {
		raw := "GET http://backend/ HTTP/1.1\r\nHost: backend\r\n" + c.head + "\r\n"
		var got [2]fasthttp.Request
		var arrived [2]time.Duration
		for i := range got {
			req := &got[i]
			if err := req.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			seen := ScanRequestHeaders(&req.Header)
			if i == 0 {
				if (seen&seenDeadline != 0) != c.seen {
					t.Errorf("%q: scan saw Retrycap-Deadline %v, want %v", c.head, seen&seenDeadline != 0, c.seen)
				}
			} else {
				seen = SeenAll
			}
			var resp fasthttp.Response
			var x Exchange
			if !x.Begin(f, up, req, &resp, seen, &Scratch{}) || !x.NextAttempt() {
				t.Fatalf("%q: refused: %d %s", c.head, resp.StatusCode(), resp.Body())
			}
			if x.dl.Set() {
				arrived[i] = x.arrived
			}
			x.Abandon()
			x.End()
		}
		if arrived[0] != c.want || arrived[1] != c.want {
			t.Errorf("%q: deadline read %v with the scan, %v looking it up always; want %v", c.head, arrived[0], arrived[1], c.want)
		}
		// The header forwarded: reduced by the (sub-millisecond) time spent, or absent.
		for i := range got {
			v := string(got[i].Header.Peek("Retrycap-Deadline"))
			if c.want == 0 && v != "" && v != "soon" || c.want != 0 && v != formatMs(c.want) && v != formatMs(c.want-time.Millisecond) {
				t.Errorf("%q (pass %d): forwarded Retrycap-Deadline %q, want %d ms or 1 less", c.head, i, v, c.want.Milliseconds())
			}
		}
	}
}

func formatMs(d time.Duration) string { return string(fasthttp.AppendUint(nil, int(d.Milliseconds()))) }
