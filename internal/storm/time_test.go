package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTimeAlongTheChain runs the lab, both arms, on real proxies for a short storm27 (payment
// down from 1 s to 5 s of an 8 s load at 20 user requests/s; the user's timeout 3 s, the
// retrycap arm's max time to answer 2.7 s). The naive chain keeps working after its users gave
// up: with refused connections a user request takes at least 3.9 s (order: 3 attempts and 100 +
// 200 ms of backoff, 0.3 s; gateway: 3 x 0.3 + 0.3 = 1.2 s; entry: 3 x 1.2 + 0.3 = 3.9 s), past
// its 3 s timeout, and the tiers below keep receiving its retries (orphaned attempts > 0): the
// entry proxy stops retrying for a client that went away, but lets the attempt under way run
// to its end. The
// retrycap arm's entry proxy sets Retrycap-Deadline; every tier stops in time: 0 orphaned
// attempts, and the user's wait during the outage at p99 within 2.7 s plus waitSlack (250 ms,
// the answer's trip and scheduling on a busy machine; the user would give up at 3 s).
func TestTimeAlongTheChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	o := Options{
		Scenario: "storm27", Duration: 8 * time.Second, OutageStart: time.Second, OutageLength: 4 * time.Second,
		RPS: 20, UserTimeout: 3 * time.Second, ProxyBinary: proxyBin,
		ChartPath: filepath.Join(dir, "storm.svg"), AccessLogDir: filepath.Join(dir, "logs"),
	}
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	n, c := res.Naive, res.Retrycap
	if res.Options.MaxTimeToAnswer != 2700*time.Millisecond {
		t.Fatalf("max time to answer %s, want 2.7s", res.Options.MaxTimeToAnswer)
	}
	for _, a := range []ArmResult{n, c} {
		if a.Orphans == nil || a.Orphans.Checked == 0 || a.Orphans.Unmatched != 0 || a.Wait.N == 0 {
			t.Fatalf("%s arm: orphans %+v, wait %+v: want attempts checked, every one joined to its user request, waits measured",
				a.Arm, a.Orphans, a.Wait)
		}
		// Every user request sent in the outage has its wait: 20/s for the outage's 4 s, 80
		// (the kill and the restore are measured when the driver gets to them: a stall of the
		// machine moves either end, by a send per 50 ms).
		if a.Wait.N < 72 || a.Wait.N > 88 {
			t.Fatalf("%s arm: %d waits measured in a 4 s outage at 20/s", a.Arm, a.Wait.N)
		}
	}
	if n.Orphans.Attempts == 0 {
		t.Errorf("naive arm: 0 orphaned attempts of %d (want > 0: its chain outlives the user's 3 s)", n.Orphans.Checked)
	}
	if n.Wait.GaveUp == 0 {
		t.Errorf("naive arm: no user request given up at its timeout; wait %+v", n.Wait)
	}
	if c.Orphans.Attempts != 0 {
		t.Errorf("retrycap arm: %d orphaned attempts (%v) of %d, over %d user requests; want 0",
			c.Orphans.Attempts, c.Orphans.ByTier, c.Orphans.Checked, c.Orphans.Users)
	}
	if limit := res.Options.MaxTimeToAnswer + waitSlack; c.Wait.P99 > limit || c.Wait.GaveUp != 0 {
		t.Errorf("retrycap arm: wait p99 %s, %d given up; want <= %s and none", c.Wait.P99, c.Wait.GaveUp, limit)
	}
	t.Logf("naive: wait p50 %s p99 %s, %d of %d given up, orphaned %d (%v) of %d; retrycap: wait p50 %s p99 %s, orphaned %d of %d",
		n.Wait.P50, n.Wait.P99, n.Wait.GaveUp, n.Wait.N, n.Orphans.Attempts, n.Orphans.ByTier, n.Orphans.Checked,
		c.Wait.P50, c.Wait.P99, c.Orphans.Attempts, c.Orphans.Checked)

	// The figures reach the summary, the JSON and the chart.
	var sum bytes.Buffer
	if err := res.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"user's wait for an answer, sent during the outage: p50 / p99 (max)",
		"orphaned attempts (started at a tier after the user stopped waiting): gateway / order / payment",
		"user's wait during the outage, p99",
		"max time to answer 2.7s",
	} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		MaxTimeToAnswer string `json:"maxTimeToAnswer"`
		Naive, Retrycap struct {
			UserWaitP50, UserWaitP99 string
			OrphanedAttempts         *int
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.MaxTimeToAnswer != "2.7s" || got.Naive.OrphanedAttempts == nil || *got.Naive.OrphanedAttempts != n.Orphans.Attempts ||
		got.Retrycap.OrphanedAttempts == nil || *got.Retrycap.OrphanedAttempts != c.Orphans.Attempts ||
		got.Retrycap.UserWaitP99 != jsonDuration(c.Wait.P99) || got.Naive.UserWaitP50 != jsonDuration(n.Wait.P50) {
		t.Errorf("JSON %+v does not carry the figures:\n%s", got, js.String())
	}
	svg, err := os.ReadFile(res.ChartPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "orphaned attempts " + strconv.Itoa(c.Orphans.Attempts); !bytes.Contains(svg, []byte(want)) {
		t.Errorf("chart lacks %q", want)
	}
}
