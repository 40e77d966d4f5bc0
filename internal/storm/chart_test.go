package storm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The chart's legend carries each arm's time figures, and who gave up only when someone did;
// the shaded outage says how payment went down.
func TestChartLegend(t *testing.T) {
	for _, c := range []struct {
		arm  ArmResult
		want string
	}{
		{ArmResult{Arm: "naive", Wait: Wait{N: 750, P50: 10 * time.Second, P99: 10010 * time.Millisecond, GaveUp: 412}, Orphans: &Orphans{Attempts: 1093, Checked: 4802}},
			"naive: user's wait in the outage p50 10.00 s, p99 10.01 s, 412 of 750 gave up; orphaned attempts 1093"},
		{ArmResult{Arm: "retrycap", Wait: Wait{N: 750, P50: 300 * time.Microsecond, P99: 1590 * time.Millisecond}, Orphans: &Orphans{Checked: 4802}},
			"retrycap: user's wait in the outage p50 0.3 ms, p99 1.59 s; orphaned attempts 0"},
		{ArmResult{Arm: "naive", Wait: Wait{N: 1, P50: time.Second, P99: time.Second}},
			"naive: user's wait in the outage p50 1.00 s, p99 1.00 s"},
	} {
		if got := timeLegend(c.arm); got != c.want {
			t.Errorf("timeLegend = %q, want %q", got, c.want)
		}
	}
	for outage, want := range map[string]string{OutageHang: "payment hung (15 s)", OutageKill: "payment killed (15 s)"} {
		path := filepath.Join(t.TempDir(), "storm.svg")
		r := &Result{
			Options:  Options{Outage: outage, Duration: 50 * time.Second, Capacity: 100},
			Scenario: Scenarios["storm27"],
			Timeline: Timeline{OutageStart: 5 * time.Second, Restore: 20 * time.Second, LoadEnd: 50 * time.Second},
			Naive:    ArmResult{Arm: ArmNaive, PaymentRate: []float64{50, 1350}},
			Retrycap: ArmResult{Arm: ArmRetrycap, PaymentRate: []float64{50, 3}},
		}
		if err := WriteChart(path, r); err != nil {
			t.Fatal(err)
		}
		svg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(svg), want) {
			t.Errorf("outage %s: chart lacks %q", outage, want)
		}
	}
}
