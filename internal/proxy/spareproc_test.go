package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/labapp"
)

// The retrycap-proxy process on the event loops starts with GOMAXPROCS
// loops and one P more (followSpareProc); on the goroutine engine
// GOMAXPROCS is left as set. Read from the Go collector's gauge on the
// admin port.
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

// gomaxprocs is the proxy's GOMAXPROCS, from its Go collector's gauge.
func gomaxprocs(t *testing.T, admin string) float64 {
	t.Helper()
	code, text, err := adminGet(admin, "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	return metricValue(text, "go_sched_gomaxprocs_threads")
}

// awaitProcs polls the gauge until it reads want (within 30 s: the spare P
// goes after 5 quiet one-second windows).
func awaitProcs(t *testing.T, admin string, want float64, what string) {
	t.Helper()
	var got float64
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got = gomaxprocs(t, admin); got == want {
			return
		}
	}
	t.Fatalf("%s: go_sched_gomaxprocs_threads %v, want %v", what, got, want)
}

// The spare P follows the loops' traffic: it goes when the loops have been
// quiet for 5 windows (a gRPC-only sidecar's relay then wakes no second
// thread), comes back under HTTP/1.1 traffic (real requests through the
// proxy to a real backend) and goes again when the traffic stops.
func TestSpareProcFollowsTraffic(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	script := filepath.Join(t.TempDir(), "proxy.sh")
	if err := os.WriteFile(script, fmt.Appendf(nil, "#!/bin/sh\nGOMAXPROCS=1 exec %s \"$@\"\n", proxyBin), 0o700); err != nil { //nolint:gosec // a test's script
		t.Fatal(err)
	}
	p, err := labapp.StartProxy(script, 10*time.Second, "--upstreams", "backend", "--resolve", "backend="+backend.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })

	awaitProcs(t, p.AdminAddr, 1, "quiet from the start")

	proxyURL, err := url.Parse("http://" + p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	t.Cleanup(client.CloseIdleConnections)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent, failed int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			resp, err := client.Get("http://backend/")
			if err != nil {
				failed++
				continue
			}
			b, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || string(b) != "ok" {
				failed++
			}
			sent++
		}
	}()
	awaitProcs(t, p.AdminAddr, 2, "under HTTP/1.1 traffic")
	stop()
	wg.Wait()
	if failed != 0 || sent == 0 {
		t.Fatalf("%d requests, %d failed", sent, failed)
	}
	awaitProcs(t, p.AdminAddr, 1, "after the traffic")
}
