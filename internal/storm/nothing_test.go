package storm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestNothingMeasured: a run whose arms measured nothing (no user request sent in the outage,
// no attempt matched, no failed user request) says so in the summary, the JSON, the legend and
// the targets: no 0 ms percentile, no "0 orphaned", no NaN, no target met on nothing.
func TestNothingMeasured(t *testing.T) {
	if w := WaitOf(nil, 0, time.Second); w != (Wait{}) {
		t.Fatalf("WaitOf(no users) = %+v", w)
	}
	// Users sent outside the window only.
	users := []UserRequest{{Sent: 2 * time.Second, Done: 3 * time.Second, Op: "a"}}
	if w := WaitOf(users, 0, time.Second); w.N != 0 || w.P99 != 0 {
		t.Fatalf("WaitOf(none in window) = %+v", w)
	}
	o := OrphanedAttempts(nil, []TierAttempt{{Tier: "payment", Op: "x", At: time.Second}}, time.Second, Tiers())
	if o.Checked != 0 || o.Unmatched != 1 || o.Attempts != 0 {
		t.Fatalf("OrphanedAttempts(no users) = %+v", o)
	}
	arm := func(name string) ArmResult {
		return ArmResult{Arm: name, Orphans: &o, PerFailed: &PerFailedCount{Full: 27}}
	}
	r := &Result{
		Options:  Options{Protocol: ProtocolHTTP, RPS: 20, Duration: 14 * time.Second, UserTimeout: 3 * time.Second, MaxTimeToAnswer: 2700 * ms, Outage: OutageKill},
		Scenario: Scenarios["storm27"],
		Naive:    arm(ArmNaive), Retrycap: arm(ArmRetrycap),
	}
	r.Targets = Judge(r.Naive, r.Retrycap, 3, time.Second, r.Options.MaxTimeToAnswer)
	for _, tg := range r.Targets {
		if tg.Met {
			t.Errorf("target %q met on nothing measured (got %s)", tg.Name, tg.Got)
		}
		if tg.Name == "user's wait during the outage, p99" && tg.Got != "not measured (naive not measured)" {
			t.Errorf("wait target got %q", tg.Got)
		}
	}
	var sum bytes.Buffer
	if err := r.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	for want, n := range map[string]int{
		"not measured (no user request sent in the outage)\t":      0, // (tabs are padded away)
		"not measured (no user request sent in the outage) ":       2, // both arms' wait
		"not measured (no attempt checked)":                        2,
		"not measured (no user request sent in the outage failed)": 3, // both arms, and the target
		"naive made none: no reduction to measure":                 1,
		"not measured (naive made no retry; retrycap 0)":           1,
		"not measured (no POST charged)":                           1,
	} {
		if got := strings.Count(sum.String(), want); got != n {
			t.Errorf("summary says %q %d times, want %d:\n%s", want, got, n, sum.String())
		}
	}
	for _, bad := range []string{"NaN", "Inf", "0.0 ms", "0.00 (max"} {
		if strings.Contains(sum.String(), bad) {
			t.Errorf("summary says %q:\n%s", bad, sum.String())
		}
	}
	if got, want := timeLegend(r.Naive), "naive: user's wait in the outage not measured (no user request sent in the outage); orphaned attempts not measured (no attempt checked)"; got != want {
		t.Errorf("legend %q, want %q", got, want)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var all map[string]any
	if err := json.Unmarshal(js.Bytes(), &all); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{"naive": all["naive"].(map[string]any), "retrycap": all["retrycap"].(map[string]any)}
	for arm, m := range got {
		for _, k := range []string{"userWaitP50", "userWaitP99", "userWaitMax", "orphanedAttempts", "orphanedUserRequests"} {
			if v, ok := m[k]; !ok || v != nil {
				t.Errorf("%s.%s = %v (present %v), want null", arm, k, v, ok)
			}
		}
		if m["userWaitCount"] != 0.0 || m["attemptsChecked"] != 0.0 {
			t.Errorf("%s: userWaitCount %v, attemptsChecked %v, want 0", arm, m["userWaitCount"], m["attemptsChecked"])
		}
	}
}
