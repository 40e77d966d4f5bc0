package cli

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestObserveTruncatedRotation: a directory holding a whole log and a rotation cut short (a
// copy taken while logrotate compressed it). Before: the run stopped at the broken file, so
// the files after it were never read, and printed no report. Now: every file is read, the
// lines before the break are counted and reported, and the run exits 2 naming the file, the
// line and the offsets.
func TestObserveTruncatedRotation(t *testing.T) {
	dir := t.TempDir()
	var rot strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&rot, "%s\n", accessLine("web", "order", fmt.Sprintf("rot-%05d", i), 1, 200))
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(rot.String()))
	zw.Close()
	cut := z.Bytes()[:z.Len()/2]
	broken := filepath.Join(dir, "a-proxy.log.1.gz") // walked first
	if err := os.WriteFile(broken, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	whole := filepath.Join(dir, "b-proxy.log")
	var w strings.Builder
	for a := 1; a <= 7; a++ {
		fmt.Fprintf(&w, "%s\n", accessLine("web", "order", "retried", a, 503))
	}
	if err := os.WriteFile(whole, []byte(w.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe", "-f", dir}, strings.NewReader(""), &stdout, &stderr)
	if code != ExitBadInput {
		t.Fatalf("exit %d, want 2\n%s", code, stderr.String())
	}
	// The whole file's key is in the report: the break did not end the run.
	if !strings.Contains(stdout.String(), "retried") {
		t.Fatalf("the report lacks the key of the file after the broken one:\n%s", stdout.String())
	}
	errLine := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(errLine) != 2 {
		t.Fatalf("stderr: %q", stderr.String())
	}
	var lines, attempts, bad int
	if _, err := fmt.Sscanf(strings.ReplaceAll(errLine[0], ",", ""), "observe: %d lines read: %d attempts 0 skipped %d bad 0 over the line limit", &lines, &attempts, &bad); err != nil {
		t.Fatalf("counts %q: %v", errLine[0], err)
	}
	if lines != attempts+bad || bad != 1 || attempts < 7+100 || attempts >= 7+3000 {
		t.Fatalf("counts %q", errLine[0])
	}
	rotWhole := attempts - 7
	lineLen := len(accessLine("web", "order", "rot-00000", 1, 200)) + 1
	want := fmt.Sprintf("retrycap: observe: 1 stream(s) could not be read to the end (the lines before each break are counted above): "+
		"%s: read error at line %d, byte %d of the stream (the lines before it are counted): gzip: the compressed stream breaks after byte %d of the file: unexpected EOF",
		broken, rotWhole+1, rotWhole*lineLen, len(cut))
	if errLine[1] != want {
		t.Fatalf("got  %s\nwant %s", errLine[1], want)
	}
}

// TestObserveBlankLinesOnly: nothing read is an error, exit 2.
func TestObserveBlankLinesOnly(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe"}, strings.NewReader("\n\n   \n\r\n"), &stdout, &stderr)
	want := "observe: 4 lines read: 0 attempts, 4 skipped, 0 bad, 0 over the line limit\n" +
		"retrycap: observe: no access-log line among the 4 line(s) read: nothing to report (is the access log on? a RetryPolicy's spec.observability.accessLog, " +
		"retrycap-proxy --access-log; or Envoy's or Istio's default formats)\n"
	if code != ExitBadInput || stderr.String() != want || stdout.Len() != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
}
