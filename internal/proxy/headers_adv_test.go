package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// seenReq is what the backend received on one attempt: every value of the
// fields the proxy rewrites.
type seenReq struct {
	path                           string
	deadline, budget, key, baggage []string
}

// recorder is a loopback backend that records each attempt and answers 503
// on /fail, 200 elsewhere.
type recorder struct {
	addr string
	mu   sync.Mutex
	reqs []seenReq
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &recorder{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, seenReq{path: r.URL.Path, deadline: r.Header.Values("Retrycap-Deadline"), budget: r.Header.Values("Retrycap-Budget"),
			key: r.Header.Values("Idempotency-Key"), baggage: r.Header.Values("Baggage")})
		rc.mu.Unlock()
		if r.URL.Path == "/fail" {
			w.WriteHeader(503)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}), MaxHeaderBytes: 1 << 20}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return rc
}

// take returns the attempts recorded since the last take.
func (rc *recorder) take() []seenReq {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	r := rc.reqs
	rc.reqs = nil
	return r
}

// rawRequest sends one request with exactly these header lines to the
// proxy and reads its answer.
func rawRequest(t *testing.T, proxyAddr, method, path string, lines []string, body string) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	var b strings.Builder
	b.WriteString(method + " http://svc" + path + " HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n")
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	if body != "" || method == "POST" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%v: no answer: %v", lines, err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp
}

// TestHeaderClassesBothEngines sends the odd values of the fields a caller
// controls (Retrycap-Budget, Retrycap-Deadline, their baggage members) to an
// entry proxy on each engine (--chain-cap 4, 3 attempts, --max-time-to-answer
// 5s) and checks what the backend received on every attempt: a malformed
// value counts as absent (the entry's own bound), a caller can lower a bound
// and never raise it, repeated values give the smallest. Both engines alike.
func TestHeaderClassesBothEngines(t *testing.T) {
	rc := newRecorder(t)
	flags := []string{"--upstreams", "svc=3", "--resolve", "svc=" + rc.addr, "--entrypoint", "--max-time-to-answer", "5s", "--chain-cap", "4"}
	budgets := []struct {
		name  string
		lines []string
		want  string // the budgets the attempts carried
	}{
		{"absent: the cap", nil, "2 1 1"},
		{"raised: 1000", []string{"Retrycap-Budget: 1000"}, "2 1 1"},
		{"1: one attempt", []string{"Retrycap-Budget: 1"}, "1"},
		{"2", []string{"Retrycap-Budget: 2"}, "1 1"},
		{"blanks around 1", []string{"Retrycap-Budget: \t1 "}, "1"},
		{"0 is malformed: absent", []string{"Retrycap-Budget: 0"}, "2 1 1"},
		{"-1", []string{"Retrycap-Budget: -1"}, "2 1 1"},
		{"+1", []string{"Retrycap-Budget: +1"}, "2 1 1"},
		{"1.0", []string{"Retrycap-Budget: 1.0"}, "2 1 1"},
		{"1e0", []string{"Retrycap-Budget: 1e0"}, "2 1 1"},
		{"2^63", []string{"Retrycap-Budget: 9223372036854775808"}, "2 1 1"},
		{"2^64+1: no wrap to 1", []string{"Retrycap-Budget: 18446744073709551617"}, "2 1 1"},
		{"empty", []string{"Retrycap-Budget:"}, "2 1 1"},
		{"a list: the smallest", []string{"Retrycap-Budget: 1000, 2, junk"}, "1 1"},
		{"two fields: the smallest, either order", []string{"Retrycap-Budget: 1", "Retrycap-Budget: 1000"}, "1"},
		{"two fields, small last", []string{"Retrycap-Budget: 1000", "Retrycap-Budget: 1"}, "1"},
		{"baggage member", []string{"Baggage: a=b, retrycap-budget=1"}, "1"},
		{"baggage duplicates: the smallest", []string{"Baggage: retrycap-budget=3,retrycap-budget=1"}, "1"},
		{"baggage percent-encoded: not a number", []string{"Baggage: retrycap-budget=%31"}, "2 1 1"},
		{"header and baggage: the smaller", []string{"Retrycap-Budget: 3", "Baggage: retrycap-budget=2"}, "1 1"},
	}
	deadlines := []struct {
		name   string
		lines  []string
		lo, hi int // the Retrycap-Deadline the backend saw (ms)
	}{
		{"absent: the entry's bound", nil, 4000, 5000},
		{"empty", []string{"Retrycap-Deadline:"}, 4000, 5000},
		{"-1", []string{"Retrycap-Deadline: -1"}, 4000, 5000},
		{"+5", []string{"Retrycap-Deadline: +5"}, 4000, 5000},
		{"5.0", []string{"Retrycap-Deadline: 5.0"}, 4000, 5000},
		{"1e3", []string{"Retrycap-Deadline: 1e3"}, 4000, 5000},
		{"2^63", []string{"Retrycap-Deadline: 9223372036854775808"}, 4000, 5000},
		{"2^64", []string{"Retrycap-Deadline: 18446744073709551616"}, 4000, 5000},
		{"raised: 90000", []string{"Retrycap-Deadline: 90000"}, 4000, 5000},
		{"blanks around 900", []string{"Retrycap-Deadline:  900\t"}, 500, 900},
		{"a list: the smallest", []string{"Retrycap-Deadline: 3000, 700, junk"}, 400, 700},
		{"two fields: the smallest", []string{"Retrycap-Deadline: 700", "Retrycap-Deadline: 3000"}, 400, 700},
		{"baggage member", []string{"Baggage: retrycap-deadline=700"}, 400, 700},
		{"baggage duplicates", []string{"Baggage: retrycap-deadline=3000,retrycap-deadline=600"}, 300, 600},
		{"baggage percent-encoded: absent", []string{"Baggage: retrycap-deadline=%37%30%30"}, 4000, 5000},
		{"baggage raised: the entry's bound", []string{"Baggage: retrycap-deadline=90000"}, 4000, 5000},
	}
	for _, engine := range []string{"goroutine", "loop"} {
		p := startProxyOn(t, engine, flags...)
		for _, tc := range budgets {
			resp := rawRequest(t, p.Addr(), "GET", "/fail", tc.lines, "")
			var got []string
			for _, r := range rc.take() {
				got = append(got, strings.Join(r.budget, "|"))
			}
			if resp.StatusCode != 503 || strings.Join(got, " ") != tc.want {
				t.Errorf("%s: budget %s: answer %d, attempts carried %q; want 503, %q", engine, tc.name, resp.StatusCode, got, tc.want)
			}
		}
		for _, tc := range deadlines {
			resp := rawRequest(t, p.Addr(), "GET", "/ok", tc.lines, "")
			seen := rc.take()
			if resp.StatusCode != 200 || len(seen) != 1 || len(seen[0].deadline) != 1 {
				t.Errorf("%s: deadline %s: answer %d, %d attempts %+v; want 200, one attempt with one Retrycap-Deadline", engine, tc.name, resp.StatusCode, len(seen), seen)
				continue
			}
			ms, err := strconv.Atoi(seen[0].deadline[0])
			if err != nil || ms < tc.lo || ms > tc.hi {
				t.Errorf("%s: deadline %s: backend saw Retrycap-Deadline %q, want %d..%d", engine, tc.name, seen[0].deadline[0], tc.lo, tc.hi)
			}
			for _, bag := range seen[0].baggage {
				if strings.Count(bag, "retrycap-deadline=") != 1 || !strings.Contains(bag, "retrycap-deadline="+seen[0].deadline[0]) {
					t.Errorf("%s: deadline %s: baggage %q does not carry the one forwarded deadline %s", engine, tc.name, bag, seen[0].deadline[0])
				}
			}
		}
		// No time left: answered at once, nothing forwarded.
		for _, v := range []string{"0", " 0 ", "3000, 0"} {
			resp := rawRequest(t, p.Addr(), "GET", "/ok", []string{"Retrycap-Deadline: " + v}, "")
			if seen := rc.take(); resp.StatusCode != 504 || resp.Header.Get("Retrycap-Exhausted") != "deadline" || len(seen) != 0 {
				t.Errorf("%s: deadline %q: answer %d %q, %d attempts; want 504 deadline, none", engine, v, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), len(seen))
			}
		}
	}
}

// TestIdempotencyKeyClassesBothEngines: a POST through an entry proxy
// (--chain-cap 4, 3 attempts) to an upstream answering 503, with the
// Idempotency-Key classes a client can send, on each engine alike: a key
// makes it retried with that key on every attempt; an empty one is no key (a
// generated key, sent once, returned on the answer); several fields go on as
// they came on every attempt (whatever the upstream reads, it reads the same
// each time), and the ledger charges every value, so that neither comes back
// with a fresh budget (before: [k2, k3] charged k2 alone, and k3 alone then
// made 3 more attempts, 6 under cap 4 at an upstream reading the last); a
// 10 KiB key is past the head's limit (431, nothing forwarded); the same key
// again gets what is left: nothing, no attempt.
func TestIdempotencyKeyClassesBothEngines(t *testing.T) {
	rc := newRecorder(t)
	flags := []string{"--upstreams", "svc=3", "--resolve", "svc=" + rc.addr, "--entrypoint", "--chain-cap", "4"}
	long := strings.Repeat("k", 10<<10)
	for _, engine := range []string{"goroutine", "loop"} {
		p := startProxyOn(t, engine, flags...)
		k1, k2, k3 := "k1-"+engine, "k2-"+engine, "k3-"+engine
		for _, tc := range []struct {
			name      string
			lines     []string
			status    int
			exhausted string
			keys      []string // each attempt's key fields, joined by "|"; "gen" a generated key
		}{
			{"a key", []string{"Idempotency-Key: " + k1}, 503, "attempts", []string{k1, k1, k1}},
			{"empty: no key", []string{"Idempotency-Key:"}, 503, "", []string{"gen"}},
			{"two keys", []string{"Idempotency-Key: " + k2, "Idempotency-Key: " + k3}, 503, "attempts", []string{k2 + "|" + k3, k2 + "|" + k3, k2 + "|" + k3}},
			{"10 KiB", []string{"Idempotency-Key: " + long}, 431, "", nil},
			{"the first key again: its budget is spent", []string{"Idempotency-Key: " + k1}, 503, "chain", nil},
			{"the second of two alone: charged too", []string{"Idempotency-Key: " + k3}, 503, "chain", nil},
			{"the first of two alone", []string{"Idempotency-Key: " + k2}, 503, "chain", nil},
			{"an empty field then a key: the key", []string{"Idempotency-Key:", "Idempotency-Key: k5-" + engine}, 503, "attempts",
				[]string{"|k5-" + engine, "|k5-" + engine, "|k5-" + engine}},
			{"the same key twice: one key", []string{"Idempotency-Key: k6-" + engine, "Idempotency-Key: k6-" + engine}, 503, "attempts",
				[]string{"k6-" + engine + "|k6-" + engine, "k6-" + engine + "|k6-" + engine, "k6-" + engine + "|k6-" + engine}},
			{"after it, one field", []string{"Idempotency-Key: k6-" + engine}, 503, "chain", nil},
		} {
			resp := rawRequest(t, p.Addr(), "POST", "/fail", tc.lines, "pay")
			seen := rc.take()
			var keys []string
			for _, s := range seen {
				k := strings.Join(s.key, "|")
				if len(k) == 45 && strings.HasPrefix(k, "retrycap-gen-") && resp.Header.Get("Idempotency-Key") == k {
					k = "gen" // generated, and returned to the client on the failed answer
				}
				keys = append(keys, k)
			}
			if resp.StatusCode != tc.status || resp.Header.Get("Retrycap-Exhausted") != tc.exhausted || strings.Join(keys, " ") != strings.Join(tc.keys, " ") {
				t.Errorf("%s: %s: answer %d exhausted %q, attempts with keys %.80q; want %d %q, %q",
					engine, tc.name, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), keys, tc.status, tc.exhausted, tc.keys)
			}
		}
	}
}
