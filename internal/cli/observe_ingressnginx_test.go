package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestObserveIngressNginx: `retrycap observe` on ingress-nginx's default access log counts each
// upstream try a line lists as an attempt of its $req_id at its $proxy_upstream_name, from a
// file as written and from the kubelet's CRI file on stdin alike (before: every line was "not
// read" and the run exited 2 with nothing to report).
func TestObserveIngressNginx(t *testing.T) {
	path := filepath.Join("..", "observe", "testdata", "ingress-nginx.log")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("..", "observe", "testdata", "ingress-nginx.table.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var cri strings.Builder
	for _, l := range strings.SplitAfter(string(raw), "\n") {
		if l != "" {
			cri.WriteString("2026-11-24T14:02:16.000000001Z stdout F " + l)
		}
	}
	stats := func(name string) string {
		return "observe: 7 lines read: 9 attempts (5 of them upstream tries after a request's first that its ingress-nginx line lists), 1 skipped, " +
			"1 not read (the first: " + name + ": line 4: an ingress-nginx line with no upstream ($upstream_addr \"-\"): nginx answered the request itself " +
			"(a redirect, a rate limit, a denied auth, no matching rule), no attempt reached a service), 1 bad, 0 over the line limit " +
			"(the first bad: " + name + ": line 7: ingress-nginx line: no $upstream_status (truncated line?))\n"
	}
	for _, tt := range []struct {
		name, stdin string
		args        []string
		stderr      string
	}{
		{"file", "", []string{"observe", "-f", path, "--threshold", "2"}, stats(path)},
		{"CRI on stdin", cri.String(), []string{"observe", "--threshold", "2"}, stats("stdin")},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
		if code != ExitOK || stdout.String() != string(golden) || stderr.String() != tt.stderr {
			t.Errorf("%s: exit %d\nstdout\n%s\nstderr\n%s\nwant exit 0, stdout\n%s\nstderr\n%s", tt.name, code, stdout.String(), stderr.String(), golden, tt.stderr)
		}
	}
}
