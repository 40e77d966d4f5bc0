package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
// request sent after the hang began and more than 3 s before the restore (its own send time,
// its own arm's timeline) waits out its timeout, and each has at least one orphaned attempt at
// payment: its gateway proxy's second attempt starts 1.9 s in, and the order
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
		// exactly. The driver hangs payment before the send due at the hang and restores it
		// before the one due at the restore, however late it gets to them (run.go's drive).
		if want := int(o.OutageLength * time.Duration(o.RPS) / time.Second); a.Wait.N != want {
			t.Fatalf("%s arm: %d waits measured in a 4 s outage at 20/s, want %d", a.Arm, a.Wait.N, want)
		}
	}
	if res.Options.Outage != OutageHang {
		t.Fatalf("outage %q, want the default hang", res.Options.Outage)
	}
	// Judged by the naive arm's own run, not its schedule nor the retrycap arm's timeline: on
	// a loaded machine the driver sends late and in bunches (9 sends in 20 µs) and each arm's
	// restore comes when its driver gets to it (naive 7.09 s, retrycap 5.40 s in one run at
	// load 14). A user request sent after the hang began and more than its timeout before
	// the driver called Restore saw payment hung for its whole wait: no answer reached it
	// before its timeout. Its orphaned attempt is judged from its own attempts, since on a
	// starved machine a request can reach the chain late or not at all: an attempt that
	// reached order more than 1.7 s after the send (the gateway's second, 1.9 s in) is
	// followed by the order proxy's third attempt at payment at least 500 + 100 + 500 + 200
	// ms later, or 200 ms after a restore that answers the attempt under way 503; either way
	// after the user left at 3 s (timers fire late on a busy machine, never early).
	userTimeout := o.UserTimeout
	const orderLate = 1700 * time.Millisecond
	lateAtOrder := map[string]bool{}
	sentAt := map[string]time.Duration{}
	for _, u := range n.users {
		sentAt[u.Op] = u.Sent
	}
	for _, a := range n.attempts {
		if s, ok := sentAt[a.Op]; ok && a.Tier == "order" && a.At > s+orderLate {
			lateAtOrder[a.Op] = true
		}
	}
	var inHang, noWait, noOrphan []string
	judged := 0
	for _, u := range n.users {
		if u.Sent < n.tl.OutageStart || u.Sent+userTimeout >= n.tl.restoreCalled {
			continue
		}
		inHang = append(inHang, u.Op)
		// Given up at its timeout (its wait is then the timeout), or an answer that came
		// after it, read before the user's late timer fired: not waited for either way.
		if wait := u.Done - u.Sent; wait < userTimeout {
			noWait = append(noWait, fmt.Sprintf("%s (sent %s, wait %s, ok %v)", u.Op, u.Sent, wait, u.OK))
		}
		if !lateAtOrder[u.Op] {
			continue
		}
		judged++
		if n.orphanedOps[u.Op]["payment"] == 0 {
			noOrphan = append(noOrphan, fmt.Sprintf("%s (sent %s, orphaned %v)", u.Op, u.Sent, n.orphanedOps[u.Op]))
		}
	}
	if len(inHang) == 0 || judged == 0 {
		t.Fatalf("naive arm: %d user requests sent in [hang %s, restore called %s - %s], %d of them at order %s after their send: nothing to judge",
			len(inHang), n.tl.OutageStart, n.tl.restoreCalled, userTimeout, judged, orderLate)
	}
	if len(noWait) > 0 || len(noOrphan) > 0 {
		t.Errorf("naive arm: of the %d user requests sent in [hang %s, restore called %s - %s], answered before their timeout: %v; "+
			"of the %d at order %s after their send, without an orphaned attempt at payment: %v; want none of either",
			len(inHang), n.tl.OutageStart, n.tl.restoreCalled, userTimeout, noWait, judged, orderLate, noOrphan)
	}
	if n.Orphans.Users < judged || n.Orphans.ByTier["payment"] < judged || n.Wait.Max < userTimeout {
		t.Errorf("naive arm: %d user requests with orphaned attempts (%v), longest wait %s; want at least %d, %d at payment and the user's %s",
			n.Orphans.Users, n.Orphans.ByTier, n.Wait.Max, judged, judged, userTimeout)
	}
	if c.Orphans.Attempts != 0 {
		t.Errorf("retrycap arm: %d orphaned attempts (%v) of %d, over %d user requests; want 0",
			c.Orphans.Attempts, c.Orphans.ByTier, c.Orphans.Checked, c.Orphans.Users)
	}
	if limit := res.Options.MaxTimeToAnswer + waitSlack; c.Wait.P99 > limit || c.Wait.GaveUp != 0 {
		t.Errorf("retrycap arm: wait p99 %s, %d given up; want <= %s and none", c.Wait.P99, c.Wait.GaveUp, limit)
	}
	t.Logf("naive: %d user requests sent while the hang outlasted their timeout, %d judged for orphans; wait p50 %s p99 %s, %d of %d given up, orphaned %d (%v) of %d; retrycap: wait p50 %s p99 %s, orphaned %d of %d",
		len(inHang), judged, n.Wait.P50, n.Wait.P99, n.Wait.GaveUp, n.Wait.N, n.Orphans.Attempts, n.Orphans.ByTier, n.Orphans.Checked,
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
