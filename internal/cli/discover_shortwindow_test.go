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

// TestDiscoverSinceShorterThanTwoScrapes: a real Prometheus scraping Istio's series every 3 s
// (a cluster's 30 s or 1 m, scaled) and --since 2s: increase() needs two samples of a series in
// the window and gets one, so no query answers a series although web -> payment is called all
// along. Before: "no source's series exist", which is false and hides the fix. Now the message
// names the metric whose series exist, the cause and the flag.
func TestDiscoverSinceShorterThanTwoScrapes(t *testing.T) {
	istio := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" + istioSeries("source", "web", "shop", "payment", "shop", "200", 4*n)
	}})
	prom := promtest.StartTargetsEvery(t, "../..", 3*time.Second, []promtest.Target{{Addr: istio}})
	client, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(client)
	for deadline := time.Now().Add(60 * time.Second); ; {
		v, _, _, err := papi.Query(context.Background(), `count_over_time(istio_requests_total[1m])`, time.Now())
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 && vec[0].Value >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two scrapes not within 60s: %v %v", v, err)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	code, out, stderr := run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "2s")
	want := "retrycap: discover: nothing found: no edge observed over 2s at " + prom.URL +
		" (no query's increase() answered a series, yet series of istio_requests_total exist: increase() needs two samples of a series within --since 2s, which a window shorter than twice the scrape interval (Prometheus' default scrape_interval is 1m) does not hold; raise --since)\n"
	if code != ExitBadInput || out != "sources: []\nwindow: 2s\nworkloads: []\n" || stderr != want {
		t.Fatalf("exit %d, stdout %q\ngot  %s\nwant %s", code, out, stderr, want)
	}
	code, out, stderr = run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "10s")
	if code != 0 || !strings.Contains(out, "upstream: payment") {
		t.Fatalf("--since 10s: exit %d\n%s\n%s", code, out, stderr)
	}
}
