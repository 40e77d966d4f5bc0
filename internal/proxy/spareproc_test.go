package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/labapp"
)

// The retrycap-proxy process leaves GOMAXPROCS as set on both engines: the
// event loops park in the runtime's poller when idle (netpoll.Poller.Wait),
// so they need no spare P beside them (the spare P they once had, one P
// more than loops, woke a second thread for the h2 relay's goroutines).
// Read from the Go collector's gauge on the admin port.
func TestNoSpareProc(t *testing.T) {
	for _, c := range []struct {
		engine     string
		gomaxprocs int
		want       float64
	}{
		{"loop", 1, 1},
		{"loop", 2, 2},
		{"goroutine", 1, 1},
		{"goroutine", 2, 2},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.engine, c.gomaxprocs), func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "proxy.sh")
			if err := os.WriteFile(script, fmt.Appendf(nil, "#!/bin/sh\nGOMAXPROCS=%d exec %s \"$@\"\n", c.gomaxprocs, proxyBin), 0o700); err != nil { //nolint:gosec // a test's script
				t.Fatal(err)
			}
			p, err := labapp.StartProxy(script, 10*time.Second, "--engine", c.engine, "--upstreams", "backend")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
			code, text, err := adminGet(p.AdminAddr, "/metrics")
			if err != nil || code != 200 {
				t.Fatalf("/metrics: %d %v", code, err)
			}
			if got := metricValue(text, "go_sched_gomaxprocs_threads"); got != c.want {
				t.Fatalf("go_sched_gomaxprocs_threads %v, want %v", got, c.want)
			}
		})
	}
}
