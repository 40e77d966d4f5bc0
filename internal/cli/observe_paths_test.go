package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestObservePaths: what -f reads besides plain files. Before, a symbolic link was skipped
// silently, given by name or found below a directory (the kubelet's /var/log/containers/*.log
// are links into /var/log/pods), and so were a FIFO (`-f <(kubectl logs ...)`) and an empty
// directory: nothing read, or a report without those lines.
func TestObservePaths(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pods := write("pods/shop_order/retrycap-proxy/0.log", accessLine("order", "payment", "k1", 1, 503)+"\n"+accessLine("order", "payment", "k1", 2, 503)+"\n")
	link(pods, "containers/order.log")
	link(filepath.Join(dir, "pods"), "containers/pods-dir")
	if err := syscall.Mkfifo(filepath.Join(dir, "containers", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	link(filepath.Join(dir, "nowhere.log"), "broken/x.log")
	dirLink := link(filepath.Join(dir, "pods"), "pods-link")
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	const two = "observe: 2 lines read: 2 attempts, 0 skipped, 0 bad, 0 over the line limit\n"
	for _, tt := range []struct {
		name, path string
		code       int
		stderr     string
	}{
		{"a link to a file, given by name", filepath.Join(dir, "containers", "order.log"), ExitOK, two},
		{"a link to a directory, given by name", dirLink, ExitOK, two},
		{"links to files below a directory are read; to a directory and a FIFO, named", filepath.Join(dir, "containers"), ExitOK,
			"observe: warning: " + filepath.Join(dir, "containers", "fifo") + ": a named pipe, not a file: not read (give it with -f to read it)\n" +
				"observe: warning: " + filepath.Join(dir, "containers", "pods-dir") + ": a symbolic link to a directory, not followed (give it with -f to read it)\n" + two},
		{"a broken link below a directory", filepath.Join(dir, "broken"), ExitBadInput,
			"observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
				"retrycap: observe: " + filepath.Join(dir, "broken", "x.log") + ": a symbolic link to " + filepath.Join(dir, "nowhere.log") + ": no such file or directory\n"},
		{"an empty directory", filepath.Join(dir, "empty"), ExitBadInput,
			"observe: warning: " + filepath.Join(dir, "empty") + ": a directory with no file in it (or below it): nothing read from it\n" +
				"observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
				"retrycap: observe: no access-log line among the 0 line(s) read: nothing to report (is the access log on? a RetryPolicy's spec.observability.accessLog, retrycap-proxy --access-log; or Envoy's or Istio's default formats)\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute([]string{"observe", "-f", tt.path, "--threshold", "0"}, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || stderr.String() != tt.stderr {
				t.Fatalf("exit %d, stderr\n%s\nwant exit %d, stderr\n%s", code, stderr.String(), tt.code, tt.stderr)
			}
			if tt.code == ExitOK && !strings.Contains(stdout.String(), "1 key with more than 0 attempts; peak 2 for one key") {
				t.Fatalf("stdout:\n%s", stdout.String())
			}
		})
	}
	// A FIFO given by name is read, as cat reads it.
	fifo := filepath.Join(dir, "containers", "fifo")
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		_, err = f.WriteString(accessLine("order", "payment", "k2", 1, 503) + "\n" + accessLine("order", "payment", "k2", 2, 200) + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe", "-f", fifo, "--threshold", "0"}, strings.NewReader(""), &stdout, &stderr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code != ExitOK || stderr.String() != two || !strings.Contains(stdout.String(), "1 key with more than 0 attempts; peak 2 for one key") {
		t.Fatalf("a FIFO: exit %d, stderr %q\n%s", code, stderr.String(), stdout.String())
	}
}
