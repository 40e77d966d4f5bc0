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
