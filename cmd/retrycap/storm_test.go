package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/labapp"
)

// TestStormShort runs what the docs tell a user to run, `retrycap storm --short` (-o json, no
// chart, a proxy built from this tree), both arms on real proxies, and checks its exit status
// (0: every target met), each target's verdict by name, and the counts that are exact by
// construction: 800 user requests per arm (50/s for 16 s), 250 of them sent during the 5 s
// hang (the load loop hangs and restores payment between two user requests by their
// schedule), no request at payment without a user request, and for the retrycap arm no retry
// by the entry proxy (its 2.7 s deadline is under half its 6 s per-try timeout) or the order
// proxy (it carries a chain budget of 1 in storm27), at most 49 by the gateway's (its breaker
// opens at the 50th failure and stays open while payment hangs: storm.RetrycapRetryBound), at
// most 2 requests at payment per user request (the gateway's 2 attempts of the cap's 4), no
// duplicate and no orphaned attempt. The 3 s hang this preset had measured 92.2 % fewer
// retries against the 94 % target and exited 1 (docs/storm-lab.md).
func TestStormShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the storm lab's short preset: real proxies, about 45 s")
	}
	bin, err := labapp.BuildProxy("../..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := Execute([]string{"storm", "--short", "-o", "json", "--chart", "", "--proxy-binary", bin}, strings.NewReader(""), &stdout, &stderr)
	var res struct {
		Passed  bool
		Targets []struct {
			Name, Want, Got string
			Met             bool
		}
		Naive, Retrycap stormArm
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("exit %d, stderr %q: JSON: %v\n%s", code, stderr.String(), err, stdout.String())
	}
	t.Logf("stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	wantTargets := []string{
		"requests at payment per failed user request (max, exact)",
		"retries during the outage",
		"time to recover",
		"duplicated POST side effects",
		"user's wait during the outage, p99",
		"orphaned attempts (started after the user stopped waiting)",
	}
	if len(res.Targets) != len(wantTargets) {
		t.Fatalf("%d targets, want %d: %+v", len(res.Targets), len(wantTargets), res.Targets)
	}
	for i, tg := range res.Targets {
		if tg.Name != wantTargets[i] || !tg.Met {
			t.Errorf("target %d: %q want %s, got %s, met %v; want %q met", i, tg.Name, tg.Want, tg.Got, tg.Met, wantTargets[i])
		}
	}
	if code != 0 || !res.Passed {
		t.Errorf("exit %d, passed %v; want 0, true", code, res.Passed)
	}
	for _, a := range []struct {
		name string
		arm  stormArm
	}{{"naive", res.Naive}, {"retrycap", res.Retrycap}} {
		if a.arm.Sent != 800 || a.arm.UserWaitCount != 250 || a.arm.PaymentUnmatched == nil || *a.arm.PaymentUnmatched != 0 {
			t.Errorf("%s: %d user requests, %d sent during the outage, %v at payment unmatched; want 800, 250, 0",
				a.name, a.arm.Sent, a.arm.UserWaitCount, a.arm.PaymentUnmatched)
		}
	}
	rc := res.Retrycap
	if h := rc.RetriesInOutageByProxy; h["entry"] != 0 || h["order"] != 0 || h["gateway"] > 49 || h["gateway"] != rc.RetriesInOutage {
		t.Errorf("retrycap retries during the outage %v by proxy %v; want entry 0, gateway at most 49 (all of them), order 0", rc.RetriesInOutage, h)
	}
	if rc.PaymentPerFailedMax == nil || *rc.PaymentPerFailedMax > 2 || rc.Duplicates != 0 ||
		rc.OrphanedAttempts == nil || *rc.OrphanedAttempts != 0 || rc.AttemptsChecked == nil || *rc.AttemptsChecked == 0 {
		t.Errorf("retrycap: at payment per failed user request max %v, duplicates %d, orphaned %v of %v; want at most 2, 0, 0 of some",
			rc.PaymentPerFailedMax, rc.Duplicates, rc.OrphanedAttempts, rc.AttemptsChecked)
	}
}

// stormArm is the part of an arm's JSON (storm.Result.WriteJSON) TestStormShort reads.
type stormArm struct {
	Sent                   int
	UserWaitCount          int
	PaymentUnmatched       *int
	PaymentPerFailedMax    *int
	RetriesInOutage        float64
	RetriesInOutageByProxy map[string]float64
	Duplicates             int64
	OrphanedAttempts       *int
	AttemptsChecked        *int
}
