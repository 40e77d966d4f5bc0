package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
)

// TestDiscoverAllSeriesRefused: a real Prometheus whose only increasing series name a caller
// that is no workload name (source_workload "we/b"): discover finds nothing, and says the series
// were refused (the warning above), not that none increased (which it printed before: false, the
// counter grows at every scrape).
func TestDiscoverAllSeriesRefused(t *testing.T) {
	istio := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" +
			istioSeries("source", "we/b", "shop", "payment", "shop", "200", 5*n)
	}})
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: istio}})
	c, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(c)
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, _, _, err := papi.Query(context.Background(), `count_over_time(istio_requests_total[1m])`, time.Now())
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 && vec[0].Value >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("five scrapes: not within 60s (last: %v %v)", v, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	code, stdout, stderr := run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m")
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	want := "retrycap: discover: nothing found: no edge observed over 1m0s at " + prom.URL +
		" (series of [istio] exist, none increased on an edge that could be placed: 1 warning(s) above say what was refused)"
	if code != ExitBadInput || len(lines) != 2 || lines[1] != want ||
		!strings.HasPrefix(lines[0], "warning: ") || !strings.Contains(lines[0], "source_workload") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit %d, one warning naming source_workload, then\n%s", code, stdout, stderr, ExitBadInput, want)
	}
}
