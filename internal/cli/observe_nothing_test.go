package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestObserveNothingReadIsAnError: logs with no access-log line in them (the proxies' access
// log is off by default, so `kubectl logs ... -c retrycap-proxy | retrycap observe` reads only
// the proxy's own lines) are bad input, exit 2, not an empty report that exits 0 and reads as
// "no key was retried".
func TestObserveNothingReadIsAnError(t *testing.T) {
	dir := t.TempDir()
	proxyOwn := filepath.Join(dir, "proxy.log")
	if err := os.WriteFile(proxyOwn, []byte(`{"level":"info","msg":"listening","addr":"127.0.0.1:15001"}`+"\n"+
		`{"level":"info","msg":"admin","addr":":15020"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const hint = "nothing to report (is the access log on? a RetryPolicy's spec.observability.accessLog, " +
		"retrycap-proxy --access-log; or Envoy's or Istio's default formats)\n"
	for _, tt := range []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"empty stdin", []string{"observe"}, "",
			"observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
				"retrycap: observe: no access-log line among the 0 line(s) read: " + hint},
		{"the proxy's own lines", []string{"observe", "-f", proxyOwn}, "",
			"observe: 2 lines read: 0 attempts, 2 skipped, 0 bad, 0 over the line limit\n" +
				"retrycap: observe: no access-log line among the 2 line(s) read: " + hint},
		{"json output too", []string{"observe", "-o", "json"}, "hello\n",
			"observe: 1 lines read: 0 attempts, 1 skipped, 0 bad, 0 over the line limit\n" +
				"retrycap: observe: no access-log line among the 1 line(s) read: " + hint},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
		if code != ExitBadInput || stderr.String() != tt.want || stdout.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q\nwant exit 2, no stdout, stderr %q", tt.name, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// TestObserveNothingGroupedIsAnError: logs whose lines are access-log lines observe cannot read
// per request are exit 2 naming the format and why (before: "no access-log line ... is the
// access log on?", as if they were an application's output; and a log of Envoy TCP connection
// lines, or of HTTP attempts without any key, printed "0 keys with more than 5 attempts" and
// exited 0: no amplification, when nothing was checked).
func TestObserveNothingGroupedIsAnError(t *testing.T) {
	const nginx = `10.244.0.1 - - [24/Nov/2026:14:02:11 +0000] "GET /checkout HTTP/1.1" 502 157 "-" "curl/8.5.0"` + "\n"
	const tcp = `[2026-11-24T14:06:00.000Z] "- - -" 0 - 412 91 12 - "-" "-" "-" "-" "10.44.4.2:5432"` + "\n"
	const keyless = `[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 503 UF 0 91 12 - "-" "curl/8.5.0" "-" "catalog.shop:8080" "10.44.4.2:8080"` + "\n"
	for _, tt := range []struct {
		name, stdin, want string
	}{
		{"nginx combined", nginx + nginx,
			"observe: 2 lines read: 0 attempts, 0 skipped, 2 not read (the first: stdin: line 1: a Common or Combined Log Format line (nginx's and Apache's defaults): it carries no request id to group attempts by, and observe does not read it (it reads ingress-nginx's default log-format-upstream; or use the Envoy, Istio or retrycap-proxy access log of the same traffic)), 0 bad, 0 over the line limit\n" +
				"retrycap: observe: no HTTP attempt among the 2 line(s) read: 2 access-log line(s) of a shape observe does not read (the first: stdin: line 1: a Common or Combined Log Format line (nginx's and Apache's defaults): it carries no request id to group attempts by, and observe does not read it (it reads ingress-nginx's default log-format-upstream; or use the Envoy, Istio or retrycap-proxy access log of the same traffic)): nothing to report\n"},
		{"Envoy TCP connections", tcp + tcp + tcp,
			"observe: 3 lines read: 0 attempts, 0 skipped, 3 not read (the first: stdin: line 1: an Envoy TCP connection line (no HTTP method, response code 0): a connection, not an HTTP attempt), 0 bad, 0 over the line limit\n" +
				"retrycap: observe: no HTTP attempt among the 3 line(s) read: 3 access-log line(s) of a shape observe does not read (the first: stdin: line 1: an Envoy TCP connection line (no HTTP method, response code 0): a connection, not an HTTP attempt): nothing to report\n"},
		{"attempts without a key", keyless + keyless,
			"observe: 2 lines read: 2 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
				"retrycap: observe: 2 attempt(s) read, none with a key to group them by (Idempotency-Key, traceparent, x-request-id or storm-op): nothing to report\n"},
	} {
		for _, o := range []string{"table", "json"} {
			var stdout, stderr bytes.Buffer
			code := execute([]string{"observe", "-o", o}, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != ExitBadInput || stderr.String() != tt.want || stdout.Len() != 0 {
				t.Errorf("%s -o %s: exit %d, stdout %q, stderr %q\nwant exit 2, no stdout, stderr %q", tt.name, o, code, stdout.String(), stderr.String(), tt.want)
			}
		}
	}
}
