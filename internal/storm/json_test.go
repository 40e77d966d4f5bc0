package storm

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The JSON carries the summary's figures under stable names: durations as Go duration
// strings (to the millisecond, to the microsecond under 10 ms), orphaned attempts null when
// not measured.
func TestWriteJSON(t *testing.T) {
	r := &Result{
		Options:  Options{Protocol: ProtocolHTTP, UserTimeout: 6 * time.Second, MaxTimeToAnswer: 5400 * ms},
		Scenario: Scenarios["storm27"],
		Timeline: Timeline{OutageStart: 5001 * ms, Restore: 15001 * ms},
		Naive: ArmResult{Arm: ArmNaive, Sent: 10, Failed: 10, Wait: Wait{N: 10, GaveUp: 3, P50: 4012345 * time.Microsecond, P99: 6001 * ms, Max: 6002 * ms},
			PerFailed: &PerFailedCount{Failed: 10, Requests: 262, Mean: 26.2, Max: 27, Full: 27, AtFull: 9, Below: 1},
			Orphans:   &Orphans{Attempts: 7, ByTier: map[string]int{"gateway": 0, "order": 3, "payment": 4}, Users: 3, Checked: 270},
			Recovery:  Recovery{Observed: 30 * time.Second, LowerBound: 27 * time.Second}},
		Retrycap: ArmResult{Arm: ArmRetrycap, Sent: 10, OK: 9, Failed: 1, RetriesInOutage: 32, HopRetriesInOutage: [3]float64{0, 32, 0}, Wait: Wait{N: 10, P50: 694135 * time.Nanosecond, P99: 300087938 * time.Nanosecond, Max: 301 * ms},
			Recovery: Recovery{Recovered: true, After: 300 * ms}},
		Targets: []Target{{Name: "orphaned attempts", Want: "0", Got: "not measured", Met: false}},
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	naive, rc := got["naive"].(map[string]any), got["retrycap"].(map[string]any)
	checks := []struct {
		name      string
		got, want any
	}{
		{"maxTimeToAnswer", got["maxTimeToAnswer"], "5.4s"},
		{"userTimeout", got["userTimeout"], "6s"},
		{"outageStart", got["outageStart"], "5.001s"},
		{"passed", got["passed"], false},
		{"naive.userWaitP50", naive["userWaitP50"], "4.012s"},
		{"naive.userWaitP99", naive["userWaitP99"], "6.001s"},
		{"naive.userWaitGaveUp", naive["userWaitGaveUp"], 3.0},
		{"naive.orphanedAttempts", naive["orphanedAttempts"], 7.0},
		{"naive.orphanedAttemptsByTier.payment", naive["orphanedAttemptsByTier"].(map[string]any)["payment"], 4.0},
		{"naive.attemptsChecked", naive["attemptsChecked"], 270.0},
		{"naive.paymentPerFailed", naive["paymentPerFailed"], 26.2},
		{"naive.paymentPerFailedMax", naive["paymentPerFailedMax"], 27.0},
		{"naive.paymentPerFailedCounted", naive["paymentPerFailedCounted"], 10.0},
		{"naive.paymentPerFailedAtFull", naive["paymentPerFailedAtFull"], 9.0},
		{"naive.fullProduct", naive["fullProduct"], 27.0},
		{"naive.paymentUnmatched", naive["paymentUnmatched"], 0.0},
		{"retrycap.paymentPerFailed", rc["paymentPerFailed"], nil},
		{"retrycap.paymentPerFailedMax", rc["paymentPerFailedMax"], nil},
		{"naive.notRecoveredWithin", naive["notRecoveredWithin"], "30s"},
		{"retrycap.userWaitP50", rc["userWaitP50"], "694µs"},
		{"retrycap.userWaitP99", rc["userWaitP99"], "300ms"},
		{"retrycap.orphanedAttempts", rc["orphanedAttempts"], nil},
		{"retrycap.recoveryIn", rc["recoveryIn"], "300ms"},
		{"retrycap.retriesInOutage", rc["retriesInOutage"], 32.0},
		{"retrycap.retriesInOutageByProxy.entry", rc["retriesInOutageByProxy"].(map[string]any)["entry"], 0.0},
		{"retrycap.retriesInOutageByProxy.gateway", rc["retriesInOutageByProxy"].(map[string]any)["gateway"], 32.0},
		{"retrycap.retriesInOutageByProxy.order", rc["retriesInOutageByProxy"].(map[string]any)["order"], 0.0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	for _, k := range []string{"orphanedAttempts", "paymentPerFailed", "paymentPerFailedMax", "paymentPerFailedCounted", "paymentPerFailedAtFull"} {
		if _, ok := rc[k]; !ok {
			t.Errorf("retrycap.%s missing: want null when not measured", k)
		}
	}
}
