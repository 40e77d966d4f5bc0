package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Issue 25, part 2: a key the entry proxy generated does not make a call
// retryable; only a key the client sent does, or any key toward an
// upstream declared (--dedup-upstreams) to deduplicate by key. The rule is
// policy.KeyRetryable, shared by the HTTP/1.1 exchange and the h2c path:
// both are driven here against an upstream that always answers 503 (so
// the calls it sees are the attempts made).
func TestDedupUpstreamsKeyRule(t *testing.T) {
	const gen = "retrycap-gen-00112233445566778899aabbccddeeff"
	for _, tc := range []struct {
		name  string
		entry bool
		dedup bool
		key   string // the key the request comes with ("" none)
		calls int64  // attempts the upstream sees
	}{
		{"entry keyless", true, false, "", 1},
		{"entry keyless, dedup upstream", true, true, "", 3},
		{"entry client key", true, false, "k-1", 3},
		{"below keyless", false, false, "", 1},
		{"below keyless, dedup upstream", false, true, "", 1},
		{"below generated key", false, false, gen, 1},
		{"below generated key, dedup upstream", false, true, gen, 3},
		{"below client key", false, false, "k-1", 3},
	} {
		for _, proto := range []string{"HTTP/1.1", "h2"} {
			t.Run(tc.name+" "+proto, func(t *testing.T) {
				b, _ := newDualBackend(t, func(int64, http.ResponseWriter, *http.Request) {})
				b.behave = status(503)
				args := []string{"--upstreams", "svc=3", "--resolve", "svc=" + b.addr()}
				if tc.entry {
					args = append(args, "--entrypoint")
				}
				if tc.dedup {
					args = append(args, "--dedup-upstreams", "svc")
				}
				p := startProxy(t, args...)
				var code int
				var key string
				if proto == "h2" {
					hdr := map[string]string{}
					if tc.key != "" {
						hdr["Idempotency-Key"] = tc.key
					}
					resp, _ := doBody(t, h2Client(t, p), "POST", "http://svc/pay", hdr)
					code, key = resp.StatusCode, resp.Header.Get("Idempotency-Key")
				} else {
					c := proxytest.Dial(t, p.Addr())
					h := ""
					if tc.key != "" {
						h = "Idempotency-Key: " + tc.key + "\r\n"
					}
					c.Send(fmt.Sprintf("POST http://svc/pay HTTP/1.1\r\nHost: svc\r\n%sContent-Length: 4\r\n\r\nbody", h))
					resp, _ := c.Answer("POST")
					code, key = resp.StatusCode, resp.Header.Get("Idempotency-Key")
				}
				if code != 503 || b.hits.Load() != tc.calls {
					t.Fatalf("%d after %d upstream calls, want 503 after %d", code, b.hits.Load(), tc.calls)
				}
				// Every attempt carried one key: the client's, or the one
				// the entry generated (returned to the client on the 503).
				b.mu.Lock()
				keys := append([]string(nil), b.keys...)
				b.mu.Unlock()
				for _, k := range keys {
					switch {
					case tc.key != "" && k != tc.key:
						t.Fatalf("upstream saw key %q, want %q", k, tc.key)
					case tc.key == "" && tc.entry && (k != keys[0] || !strings.HasPrefix(k, "retrycap-gen-") || key != k):
						t.Fatalf("upstream saw keys %q, client got %q: want one generated key, returned", keys, key)
					case tc.key == "" && !tc.entry && k != "":
						t.Fatalf("upstream saw key %q below the entry, want none", k)
					}
				}
			})
		}
	}
}

// A --dedup-upstreams name that --upstreams does not list is refused,
// naming the flag, the value and the name.
func TestDedupUpstreamsUnknownName(t *testing.T) {
	_, err := ParseFlags([]string{"--upstreams", "svc=3,order", "--dedup-upstreams", "svc, payment"}, nil)
	want := `invalid value "svc, payment" for --dedup-upstreams: "payment" is not an upstream of --upstreams (svc=3,order)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}
