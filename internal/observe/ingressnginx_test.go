package observe

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// nginxLine is a line of ingress-nginx's default log-format-upstream: the request at
// 14:02:11 (+0000) lasting 0.030 s, sent to shop-checkout-8080, with the four upstream lists
// and the req_id given.
func ingressLine(addr, length, rtime, status, reqID string) string {
	return fmt.Sprintf(`10.244.0.1 - - [24/Nov/2026:14:02:11 +0000] "POST /checkout?cart=7 HTTP/1.1" 200 157 "-" "curl/8.5.0" 412 0.030 [shop-checkout-8080] [] %s %s %s %s %s`,
		addr, length, rtime, status, reqID)
}

const (
	rid1 = "6d8e6f2c0f6e4a4b9b1c7e2d3a4f5b6c"
	rid2 = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
)

// TestIngressNginx: ingress-nginx's default access log is read, one attempt per upstream try
// the line lists, keyed by $req_id, named by $proxy_upstream_name (before: every such line was
// "not read", so a gateway's retries were never counted).
func TestIngressNginx(t *testing.T) {
	three := ingressLine("10.0.0.1:8080, 10.0.0.2:8080, 10.0.0.3:8080", "0, 0, 157", "0.004, 0.008, 0.010", "502, 502, 200", rid1)
	type key struct {
		key                string
		attempts, failures int
	}
	for _, c := range []struct {
		name  string
		lines []string
		want  Stats
		keys  []key
	}{
		{"one try", []string{ingressLine("10.44.2.17:8080", "157", "0.012", "200", rid1)},
			Stats{Lines: 1, Attempts: 1}, []key{{rid1, 1, 0}}},
		{"three tries", []string{three},
			Stats{Lines: 1, Attempts: 3, ListedRetries: 2}, []key{{rid1, 3, 2}}},
		{"another upstream group ( : )", []string{ingressLine("10.0.0.1:8080, 10.0.0.2:8080 : 10.0.0.9:8080", "0, 0 : 157", "0.004, 0.008 : 0.002", "504, 502 : 200", rid1)},
			Stats{Lines: 1, Attempts: 3, ListedRetries: 2}, []key{{rid1, 3, 2}}},
		{"a try with no response (-)", []string{ingressLine("10.0.0.1:8080, 10.0.0.2:8080", "-, 157", "-, 0.008", "-, 200", rid1)},
			Stats{Lines: 1, Attempts: 2, ListedRetries: 1}, []key{{rid1, 2, 1}}},
		{"no upstream (-)", []string{ingressLine("-", "-", "-", "-", rid1)},
			Stats{Lines: 1, Unread: 1, FirstUnread: "f: line 1: " + whyNoUpstream}, nil},
		{"two requests, and the client's resend under its X-Request-ID", []string{three, ingressLine("10.0.0.4:8080", "157", "0.012", "200", rid2), ingressLine("10.0.0.1:8080", "157", "0.012", "200", rid1)},
			Stats{Lines: 3, Attempts: 5, ListedRetries: 2}, []key{{rid2, 1, 0}, {rid1, 4, 2}}},
		{"CRI file", []string{"2026-11-24T14:02:11.118123456Z stdout F " + three},
			Stats{Lines: 1, Attempts: 3, ListedRetries: 2}, []key{{rid1, 3, 2}}},
		{"kubectl logs --timestamps --prefix", []string{"[pod/ingress-nginx-controller-5c8d66c76d-4xq2k/controller] 2026-11-24T14:02:11.118123456Z " + three},
			Stats{Lines: 1, Attempts: 3, ListedRetries: 2}, []key{{rid1, 3, 2}}},
		{"truncated in a list", []string{strings.TrimSuffix(three, "200 "+rid1)},
			Stats{Lines: 1, Bad: 1, FirstBad: `f: line 1: ingress-nginx line: $upstream_status "502, 502," ends in a separator (truncated line?)`}, nil},
		{"truncated before req_id", []string{strings.TrimSuffix(three, " "+rid1)},
			Stats{Lines: 1, Bad: 1, FirstBad: `f: line 1: ingress-nginx line: no $req_id after $upstream_status (truncated line?)`}, nil},
		{"truncated after the upstream name", []string{three[:strings.Index(three, "[]")]},
			Stats{Lines: 1, Bad: 1, FirstBad: `f: line 1: ingress-nginx line: no [$proxy_alternative_upstream_name] (truncated line?)`}, nil},
		{"lists disagree", []string{ingressLine("10.0.0.1:8080, 10.0.0.2:8080, 10.0.0.3:8080", "0, 0, 157", "0.004, 0.008, 0.010", "502, 200", rid1)},
			Stats{Lines: 1, Bad: 1, FirstBad: `f: line 1: ingress-nginx line: $upstream_status lists 2 entries, $upstream_addr 3 (one per upstream try: the lists must agree): "502, 200", "10.0.0.1:8080, 10.0.0.2:8080, 10.0.0.3:8080"`}, nil},
		{"a status that is none", []string{ingressLine("10.0.0.1:8080", "157", "0.012", "OK", rid1)},
			Stats{Lines: 1, Bad: 1, FirstBad: `f: line 1: ingress-nginx line: $upstream_status entry "OK": want an HTTP status or "-"`}, nil},
		{"a \",\" without its blank", []string{ingressLine("10.0.0.1:8080,10.0.0.2:8080", "0, 157", "0.004, 0.008", "502, 200", rid1)},
			Stats{Lines: 1, Bad: 1, FirstBad: `f: line 1: ingress-nginx line: $upstream_addr "10.0.0.1:8080,1": a "," without the blank nginx writes after it`}, nil},
		{"no req_id (-): counted, keyless", []string{ingressLine("10.0.0.1:8080, 10.0.0.2:8080", "0, 157", "0.004, 0.008", "502, 200", "-")},
			Stats{Lines: 1, Attempts: 2, ListedRetries: 1}, nil},
		{"plain combined", []string{`10.244.0.1 - - [24/Nov/2026:14:02:11 +0000] "GET /checkout HTTP/1.1" 502 157 "-" "curl/8.5.0"`},
			Stats{Lines: 1, Unread: 1, FirstUnread: "f: line 1: " + whyNginx}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewGrouper()
			st, err := g.Consume(strings.NewReader(strings.Join(c.lines, "\n")+"\n"), Source{Name: "f"}, DefaultMaxLine)
			if err != nil || st != c.want {
				t.Fatalf("got %+v, %v\nwant %+v", st, err, c.want)
			}
			if st.Attempts-st.ListedRetries+st.Skipped+st.Unread+st.Bad+st.TooLong != st.Lines {
				t.Fatalf("the counters do not add up: %+v", st)
			}
			r := g.Report(0, 0)
			keyless := 0
			if len(c.keys) == 0 {
				keyless = c.want.Attempts
			}
			if r.Keys != len(c.keys) || r.Keyless != keyless {
				t.Fatalf("%d keys (%d keyless), want %d (%d keyless)", r.Keys, r.Keyless, len(c.keys), keyless)
			}
			for _, w := range c.keys {
				kr, ok := g.Key(w.key)
				if !ok || kr.Kind != "request-id" || kr.Attempts != w.attempts || kr.Failures != w.failures ||
					len(kr.Services) != 1 || kr.Services[0].Service != "shop-checkout-8080" {
					t.Errorf("key %s: %+v (found %v), want %d attempts, %d failures at shop-checkout-8080", w.key, kr, ok, w.attempts, w.failures)
				}
			}
		})
	}
}

// TestIngressNginxTries: each try is an attempt of its own, numbered, with its status and
// upstream time, one after the other from the request's start ($time_local - $request_time).
func TestIngressNginxTries(t *testing.T) {
	line := ingressLine("10.0.0.1:8080, 10.0.0.2:8080 : 10.0.0.3:8080", "0, - : 157", "0.004, - : 0.010", "502, - : 200", rid1)
	var got []string
	st, err := Parse(strings.NewReader(line+"\n"), Source{Name: "f", Service: "ingress-nginx"}, func(a Attempt) {
		got = append(got, fmt.Sprintf("%d %s %s %s->%s %s %s %d %v failed=%v %s",
			a.Number, a.Format, a.Direction, a.Caller, a.Target, a.Method, a.Path, a.Status, a.Duration, a.Failed(), a.Time.Format(time.StampMilli)))
	})
	want := []string{
		"1 ingress-nginx outbound ingress-nginx->shop-checkout-8080 POST /checkout 502 4ms failed=true Nov 24 14:02:10.970",
		"2 ingress-nginx outbound ingress-nginx->shop-checkout-8080 POST /checkout 0 0s failed=true Nov 24 14:02:10.974",
		"3 ingress-nginx outbound ingress-nginx->shop-checkout-8080 POST /checkout 200 10ms failed=false Nov 24 14:02:10.974",
	}
	if err != nil || st != (Stats{Lines: 1, Attempts: 3, ListedRetries: 2}) || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%+v %v\ngot\n%s\nwant\n%s", st, err, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := st.String(), "1 lines read: 3 attempts (2 of them upstream tries after a request's first that its ingress-nginx line lists), 0 skipped, 0 bad, 0 over the line limit"; got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
	// ParseLine gives the first try.
	a, ok, err := ParseLine([]byte(line), Source{})
	if err != nil || !ok || a.Number != 1 || a.Status != 502 || a.RequestID != rid1 || a.Target != "shop-checkout-8080" {
		t.Fatalf("%+v %v %v", a, ok, err)
	}
}

// A line cut anywhere before its $req_id is never read as an attempt: before the upstream
// name's "[" it is combined (not read), after it bad.
func TestIngressNginxCutNeverAnAttempt(t *testing.T) {
	line := ingressLine("10.0.0.1:8080, 10.0.0.2:8080 : 10.0.0.3:8080", "0, 0 : 157", "0.004, 0.008 : 0.010", "502, 502 : 200", rid1)
	reqIDAt := strings.LastIndex(line, " ") + 1
	bracket := strings.Index(line, "[shop")
	for i := 1; i < reqIDAt; i++ {
		a, ok, err := ParseLine([]byte(line[:i]), Source{})
		if ok {
			t.Errorf("cut at %d read as an attempt: %q: %+v", i, line[:i], a)
		}
		if i > bracket && err == nil {
			t.Errorf("cut at %d not bad: %q", i, line[:i])
		}
	}
}

// Folding an ingress-nginx line's tries allocates nothing once its key and name were seen.
func TestIngressNginxAllocs(t *testing.T) {
	line := []byte(ingressLine("10.0.0.1:8080, 10.0.0.2:8080 : 10.0.0.3:8080", "0, 0 : 157", "0.004, 0.008 : 0.010", "502, 502 : 200", rid1))
	g := NewGrouper()
	p := &parser{}
	fold := func() {
		if k, err := p.parse(line); k != lineAttempt {
			t.Fatalf("%v %v", k, err)
		}
		if n, ok := p.emit(g.fold); n != 3 || !ok {
			t.Fatalf("%d attempts folded, want 3", n)
		}
	}
	fold()
	if n := testing.AllocsPerRun(100, fold); n != 0 {
		t.Fatalf("%v allocs per line", n)
	}
	if kr, _ := g.Key(rid1); kr.Attempts != 306 { // 1 + AllocsPerRun's warm-up and 100 runs, 3 tries each
		t.Fatalf("%d attempts, want 306", kr.Attempts)
	}
}

// For a log store (-o csv), an ingress-nginx line is one row per try, as the file run counts it.
func TestIngressNginxCSV(t *testing.T) {
	var out strings.Builder
	c := NewCSVWriter(&out)
	st, err := c.Consume(strings.NewReader(ingressLine("10.0.0.1:8080, 10.0.0.2:8080", "-, 157", "-, 0.008", "-, 200", rid1)+"\n"), Source{Name: "f"}, DefaultMaxLine)
	if err != nil || c.Flush() != nil || st != (Stats{Lines: 1, Attempts: 2, ListedRetries: 1}) {
		t.Fatalf("%+v %v", st, err)
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"2026-11-24T14:02:10.970000Z,0,outbound,,shop-checkout-8080,POST,,/checkout,0,,,,,," + rid1 + ",,",
		"2026-11-24T14:02:10.970000Z,8000,outbound,,shop-checkout-8080,POST,,/checkout,200,,,,,," + rid1 + ",,",
	}
	if len(rows) != 3 || strings.Join(rows[1:], "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant (after the header)\n%s", out.String(), strings.Join(want, "\n"))
	}
}
