package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/labapp"
)

// The retrycap-proxy process on the event loops runs GOMAXPROCS loops with
// one P more (spareProc); on the goroutine engine GOMAXPROCS is left as set.
// Read from the Go collector's gauge on the admin port.
func TestSpareProc(t *testing.T) {
	for _, c := range []struct {
		engine     string
		gomaxprocs int
		want       float64
	}{
		{"loop", 1, 2},
		{"loop", 2, 3},
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
