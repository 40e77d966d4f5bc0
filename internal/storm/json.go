package storm

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// The lab's result as JSON (`retrycap storm -o json`): the figures of the summary, for a
// script or CI to read. Durations are Go duration strings rounded to the millisecond
// ("5.4s", "312ms"; to the microsecond under 10 ms), as analyze's JSON writes
// worstTimeToAnswer; counts are numbers.

type jsonResult struct {
	Scenario        string       `json:"scenario"`
	Chain           string       `json:"chain"`
	Protocol        string       `json:"protocol"`
	Outage          string       `json:"outage"`
	ChainCap        int          `json:"chainCap"`
	UserTimeout     string       `json:"userTimeout"`
	MaxTimeToAnswer string       `json:"maxTimeToAnswer"`
	OutageStart     string       `json:"outageStart"`
	Restore         string       `json:"restore"`
	Naive           jsonArm      `json:"naive"`
	Retrycap        jsonArm      `json:"retrycap"`
	Targets         []jsonTarget `json:"targets"`
	Passed          bool         `json:"passed"`
	Chart           string       `json:"chart,omitempty"`
}

type jsonArm struct {
	Sent            int     `json:"sent"`
	OK              int     `json:"ok"`
	Failed          int     `json:"failed"`
	FailedInOutage  int     `json:"failedInOutage"`
	PaymentInOutage float64 `json:"paymentInOutage"`
	// Requests at payment per failed user request sent during the outage, counted exactly by
	// storm-op (PerFailedExact): the mean, the max, how many failed user requests were counted
	// and how many of them caused exactly the chain's full product (fullProduct, 27 for
	// storm27); all null when not counted.
	PaymentPerFailed        *float64 `json:"paymentPerFailed"`
	PaymentPerFailedMax     *int     `json:"paymentPerFailedMax"`
	PaymentPerFailedCounted *int     `json:"paymentPerFailedCounted"`
	PaymentPerFailedAtFull  *int     `json:"paymentPerFailedAtFull"`
	// Requests at payment that carried no storm-op, or one of no user request.
	PaymentUnmatched *int    `json:"paymentUnmatched"`
	FullProduct      int     `json:"fullProduct"`
	RetriesInOutage  float64 `json:"retriesInOutage"`
	// The same per proxy: "entry", "gateway", "order" (HopProxies).
	RetriesInOutageByProxy map[string]float64 `json:"retriesInOutageByProxy"`
	// The user's wait for an answer, for the user requests sent during the outage; null when
	// none was sent (userWaitCount 0): nothing measured, not a wait of 0.
	UserWaitP50    *string `json:"userWaitP50"`
	UserWaitP99    *string `json:"userWaitP99"`
	UserWaitMax    *string `json:"userWaitMax"`
	UserWaitCount  int     `json:"userWaitCount"`
	UserWaitGaveUp int     `json:"userWaitGaveUp"`
	// Orphaned attempts, whole run; null when not measured (attemptsChecked 0 when none was
	// checked: the counts are then null too).
	OrphanedAttempts       *int           `json:"orphanedAttempts"`
	OrphanedAttemptsByTier map[string]int `json:"orphanedAttemptsByTier,omitempty"`
	OrphanedUserRequests   *int           `json:"orphanedUserRequests"`
	AttemptsChecked        *int           `json:"attemptsChecked"`
	// Recovery: recovered, and after how long (else the lower bound it did not reach within).
	Recovered  bool   `json:"recovered"`
	RecoveryIn string `json:"recoveryIn,omitempty"`
	NotWithin  string `json:"notRecoveredWithin,omitempty"`
	Charges    int64  `json:"charges"`
	Replayed   int64  `json:"replayed"`
	Duplicates int64  `json:"duplicates"`
}

type jsonTarget struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// jsonDuration is d as a Go duration string, rounded to the millisecond, or to the
// microsecond under 10 ms (a refused call answers in a fraction of a millisecond: "0s" would
// say nothing).
func jsonDuration(d time.Duration) string {
	if d < 10*time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// finite keeps a figure JSON can carry: NaN and infinities (never expected) become 0.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

func armJSON(a ArmResult) jsonArm {
	j := jsonArm{
		Sent: a.Sent, OK: a.OK, Failed: a.Failed, FailedInOutage: a.FailedInOutage,
		PaymentInOutage:        finite(a.PaymentInOutage),
		RetriesInOutage:        finite(a.RetriesInOutage),
		RetriesInOutageByProxy: byProxy(a.HopRetriesInOutage),
		UserWaitCount:          a.Wait.N, UserWaitGaveUp: a.Wait.GaveUp,
		Recovered: a.Recovery.Recovered, Charges: a.Charges, Replayed: a.Replayed, Duplicates: a.Duplicates,
	}
	if a.Wait.N > 0 {
		p50, p99, mx := jsonDuration(a.Wait.P50), jsonDuration(a.Wait.P99), jsonDuration(a.Wait.Max)
		j.UserWaitP50, j.UserWaitP99, j.UserWaitMax = &p50, &p99, &mx
	}
	if a.PerFailed != nil {
		p := *a.PerFailed
		mean := finite(p.Mean)
		j.PaymentPerFailed, j.PaymentPerFailedMax, j.PaymentPerFailedCounted, j.PaymentPerFailedAtFull = &mean, &p.Max, &p.Failed, &p.AtFull
		j.PaymentUnmatched = &p.Unmatched
		j.FullProduct = p.Full
	}
	if a.Orphans != nil {
		o := *a.Orphans
		j.AttemptsChecked = &o.Checked
		if o.Checked > 0 {
			j.OrphanedAttempts, j.OrphanedUserRequests = &o.Attempts, &o.Users
			j.OrphanedAttemptsByTier = o.ByTier
		}
	}
	if a.Recovery.Recovered {
		j.RecoveryIn = jsonDuration(a.Recovery.After)
	} else {
		j.NotWithin = jsonDuration(a.Recovery.Observed)
	}
	return j
}

// WriteJSON writes the result as one indented JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	j := jsonResult{
		Scenario: r.Scenario.Name, Chain: r.Scenario.Chain(), Protocol: r.Options.Protocol, Outage: r.Options.Outage, ChainCap: r.Scenario.ChainCap,
		UserTimeout: jsonDuration(r.Options.UserTimeout), MaxTimeToAnswer: jsonDuration(r.Options.MaxTimeToAnswer),
		OutageStart: jsonDuration(r.Timeline.OutageStart), Restore: jsonDuration(r.Timeline.Restore),
		Naive: armJSON(r.Naive), Retrycap: armJSON(r.Retrycap), Passed: r.Passed(), Chart: r.ChartPath,
		Targets: []jsonTarget{},
	}
	for _, t := range r.Targets {
		j.Targets = append(j.Targets, jsonTarget(t))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(j); err != nil {
		return fmt.Errorf("storm: JSON: %w", err)
	}
	return nil
}

// byProxy is a count per proxy keyed by HopProxies' names.
func byProxy(v [3]float64) map[string]float64 {
	out := make(map[string]float64, len(v))
	for i, name := range HopProxies() {
		out[name] = finite(v[i])
	}
	return out
}
