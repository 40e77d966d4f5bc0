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

// TestTimeAlongTheChain runs the lab, both arms, on real proxies for a short storm27 with the
// default outage, a hang (payment hung from 1 s to 5 s of an 8 s load at 20 user requests/s;
// the user's timeout 3 s, the retrycap arm's max time to answer 2.7 s). Under a hang every
// attempt waits out its per-try timeout and the naive chain's time is theirs added up: order
// 3 x 500 ms + 100 + 200 ms of backoff = 1.8 s, gateway 3 x 1.8 s + 0.3 s = 5.7 s (cut at the
// entry's 4 s), entry 3 x 4 s + 0.3 s = 12.3 s, far past the user's 3 s. So every naive user
// request sent at least 3 s before the restore is given up at its timeout, and each has at
// least one orphaned attempt: its gateway proxy's second attempt starts 1.9 s in, and the order
// proxy's third attempt under it 1.9 + 0.6 + 0.7 = 3.2 s in, after the user left at 3 s (a
// timer fires late on a busy machine, never early; a restore in between answers the attempt
// under way 503 at once, which the naive order proxy retries all the same). The apps do not
// cancel their calls when their caller hangs up (labapp.Config.KeepCallsWhenCallerGone) and
// the entry proxy stops only itself: the tiers below keep retrying for a user who left. The
// retrycap arm's entry proxy sets Retrycap-Deadline and every tier stops in time: 0 orphaned
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
	if res.Options.Outage != OutageHang {
		t.Fatalf("outage %q, want the default hang", res.Options.Outage)
	}
	// The naive user requests sent in [outage start, restore - user timeout], 100 ms in from
	// each end (the arms' timelines agree within milliseconds; a send is due every 50 ms).
	lo, hi := res.Timeline.OutageStart+100*time.Millisecond, res.Timeline.Restore-o.UserTimeout-100*time.Millisecond
	inHang := 0
	for i := 0; ; i++ {
		at := time.Duration(i) * time.Second / time.Duration(o.RPS)
		if at > hi {
			break
		}
		if at >= lo {
			inHang++
		}
	}
	if inHang < 10 {
		t.Fatalf("only %d user requests sent in the hang's first second (timeline %+v)", inHang, res.Timeline)
	}
	if n.Wait.GaveUp < inHang || n.Orphans.Users < inHang || n.Orphans.Attempts < inHang || n.Wait.Max < o.UserTimeout {
		t.Errorf("naive arm: %d given up, %d user requests with %d orphaned attempts, longest wait %s; want at least %d, %d, %d and the user's %s "+
			"(every user request sent while the hang outlasts its timeout)",
			n.Wait.GaveUp, n.Orphans.Users, n.Orphans.Attempts, n.Wait.Max, inHang, inHang, inHang, o.UserTimeout)
	}
	if n.Orphans.ByTier["payment"] < inHang {
		t.Errorf("naive arm: orphaned attempts by tier %v: want at least %d at payment (the order proxy's third attempt, 3.2 s in)", n.Orphans.ByTier, inHang)
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
			UserWaitP50, UserWaitP99 *string
			OrphanedAttempts         *int
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.MaxTimeToAnswer != "2.7s" || got.Naive.OrphanedAttempts == nil || *got.Naive.OrphanedAttempts != n.Orphans.Attempts ||
		got.Retrycap.OrphanedAttempts == nil || *got.Retrycap.OrphanedAttempts != c.Orphans.Attempts ||
		got.Retrycap.UserWaitP99 == nil || *got.Retrycap.UserWaitP99 != jsonDuration(c.Wait.P99) ||
		got.Naive.UserWaitP50 == nil || *got.Naive.UserWaitP50 != jsonDuration(n.Wait.P50) {
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
