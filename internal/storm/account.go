package storm

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/retrycap/retrycap/internal/observe"
)

// This file is the lab's accounting: pure functions from what was recorded
// (user request outcomes, counter samples, the timeline) to the figures the
// lab prints and judges. No clocks, no I/O.

// Sample is a reading of cumulative counters, At after the arm's load began.
type Sample struct {
	At time.Duration
	// PaymentRequests is how many requests were sent to payment so far:
	// the order proxy's attempts to payment, which counts refused
	// connections while payment is down as well as requests payment served
	// or rejected.
	PaymentRequests float64
	// Retries is how many retries the proxies sent so far, all hops; HopRetries the same
	// per proxy (entry, gateway, order: Retries is their sum).
	Retries    float64
	HopRetries [3]float64
	// ClientRetries is how many retries the edge client made so far (the
	// user's own, reported apart: the retrycap arm's entry proxy refuses
	// those whose chain budget is spent before they reach a service).
	ClientRetries float64
}

// UserRequest is the fate of one user request, by the edge client.
type UserRequest struct {
	Sent     time.Duration // when it was sent, after the load began
	Done     time.Duration // when the edge client had its final answer (or gave up)
	OK       bool          // the final answer was 2xx
	Attempts int           // attempts the edge client made (its own retries included)
	// GaveUp: the edge client gave up at its UserTimeout without a final answer (Done is then
	// Sent + UserTimeout, give or take the scheduler).
	GaveUp bool
	// Op is the user operation id (the baggage member storm-op every attempt of it carries),
	// which joins the tiers' access-log lines to it.
	Op string
}

// Timeline is when the fault happened, relative to the start of the load.
type Timeline struct {
	OutageStart time.Duration // payment killed
	Restore     time.Duration // payment back
	LoadEnd     time.Duration // the last user request was sent before this
	// restoreCalled is when the driver called payment's Restore: payment was down (hung) up to
	// at least then. Restore is read after the call returns, on a busy machine a scheduler's
	// delay later; a test judging what the outage did to a user request bounds it by this.
	restoreCalled time.Duration
}

// RecoveryCriterion defines "recovered": the earliest start t >= restore,
// on a grid of Step, such that in each of Windows consecutive windows of
// length Window from t the user success rate (by send time) is at least
// MinSuccess. A window in which no user request was sent does not count as
// healthy (no evidence). The recovery time is t - restore.
type RecoveryCriterion struct {
	Step       time.Duration
	Window     time.Duration
	Windows    int
	MinSuccess float64
}

// DefaultRecovery is the lab's definition: from the first 100 ms step after
// restore from which the success rate stays >= 95 % for 3 consecutive seconds.
var DefaultRecovery = RecoveryCriterion{Step: 100 * time.Millisecond, Window: time.Second, Windows: 3, MinSuccess: 0.95}

// Recovery is how an arm came back after payment returned.
type Recovery struct {
	Recovered bool
	// After is the recovery time (valid when Recovered).
	After time.Duration
	// Observed is how long after restore the load ran (LoadEnd - Restore).
	Observed time.Duration
	// LowerBound, when not Recovered, is the latest recovery time the run
	// could have confirmed: no start up to it met the criterion, so the
	// true recovery time is greater than this.
	LowerBound time.Duration
}

// ArmResult holds one arm's figures.
type ArmResult struct {
	Arm string // "naive" or "retrycap"

	Sent, OK, Failed int // user requests over the whole run

	// FailedInOutage counts user requests sent during the outage that failed.
	FailedInOutage int
	// PaymentInOutage is the requests sent to payment during the outage.
	PaymentInOutage float64
	// PerFailed is requests at payment per failed user request sent during the outage,
	// counted exactly by operation id (PerFailedExact); nil until the tiers' records are
	// read (after Compute, once the chain is closed).
	PerFailed *PerFailedCount
	// RetriesInOutage counts retries the proxies sent during the outage; HopRetriesInOutage
	// the same per proxy (entry, gateway, order), which says where they came from.
	RetriesInOutage    float64
	HopRetriesInOutage [3]float64
	// ClientRetriesInOutage counts the edge client's own retries during the outage.
	ClientRetriesInOutage float64

	Recovery Recovery

	// Side effects at payment (POSTs), over the whole run; see payment.go.
	Charges, Replayed, Duplicates int64

	// PaymentRate is requests/s sent to payment, one value per second of load.
	PaymentRate []float64
	// SuccessRate is the user success rate (0..1) by send time, one value
	// per second of load; NaN for a second in which nothing was sent.
	SuccessRate []float64

	// Wait is the user's wait for an answer, for the user requests sent during the outage.
	Wait Wait
	// Orphans are the attempts the tiers received after their user request's client had
	// stopped waiting, from what the tiers recorded (nil when not measured).
	Orphans *Orphans

	// Observed is what `retrycap observe` says of the arm's access logs.
	Observed *observe.Report

	// users (sorted by Sent) and tl are what Compute was given; attempts the tier attempts
	// and orphanedOps the orphaned ones per user operation and tier (set with Orphans): the
	// facts of the run, for a test that judges each user request by what happened to it, not
	// by the load's schedule.
	users       []UserRequest
	tl          Timeline
	attempts    []TierAttempt
	orphanedOps map[string]map[string]int
}

// Compute derives an arm's figures from what was recorded. users need not be sorted.
func Compute(arm string, users []UserRequest, samples []Sample, tl Timeline, crit RecoveryCriterion) ArmResult {
	sorted := append([]UserRequest(nil), users...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Sent < sorted[j].Sent })
	r := ArmResult{Arm: arm, Sent: len(sorted), users: sorted, tl: tl}
	for _, u := range sorted {
		if u.OK {
			r.OK++
		} else {
			r.Failed++
		}
	}
	_, _, r.FailedInOutage = countSent(sorted, tl.OutageStart, tl.Restore)
	r.PaymentInOutage = Delta(samples, tl.OutageStart, tl.Restore, paymentOf)
	r.RetriesInOutage = Delta(samples, tl.OutageStart, tl.Restore, retriesOf)
	for h := range r.HopRetriesInOutage {
		r.HopRetriesInOutage[h] = Delta(samples, tl.OutageStart, tl.Restore, func(s Sample) float64 { return s.HopRetries[h] })
	}
	r.ClientRetriesInOutage = Delta(samples, tl.OutageStart, tl.Restore, func(s Sample) float64 { return s.ClientRetries })
	r.Recovery = RecoveryAfter(sorted, tl.Restore, tl.LoadEnd, crit)
	seconds := int(math.Ceil(tl.LoadEnd.Seconds()))
	r.PaymentRate = Rates(samples, time.Second, seconds, paymentOf)
	r.SuccessRate = SuccessRates(sorted, time.Second, seconds)
	r.Wait = WaitOf(sorted, tl.OutageStart, tl.Restore)
	return r
}

func paymentOf(s Sample) float64 { return s.PaymentRequests }
func retriesOf(s Sample) float64 { return s.Retries }

// ValueAt is a cumulative counter at t, linearly interpolated between the
// samples around t (samples sorted by At); before the first sample it is
// the first sample's value, after the last the last's. 0 without samples.
func ValueAt(samples []Sample, t time.Duration, f func(Sample) float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	i := sort.Search(len(samples), func(i int) bool { return samples[i].At >= t })
	switch {
	case i == 0:
		return f(samples[0])
	case i == len(samples):
		return f(samples[len(samples)-1])
	}
	a, b := samples[i-1], samples[i]
	if b.At == a.At {
		return f(b)
	}
	frac := float64(t-a.At) / float64(b.At-a.At)
	return f(a) + frac*(f(b)-f(a))
}

// Delta is how much a cumulative counter grew between from and to.
func Delta(samples []Sample, from, to time.Duration, f func(Sample) float64) float64 {
	return ValueAt(samples, to, f) - ValueAt(samples, from, f)
}

// Rates buckets a cumulative counter into n buckets of width from 0, as a
// rate per second.
func Rates(samples []Sample, width time.Duration, n int, f func(Sample) float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		from := time.Duration(i) * width
		out[i] = Delta(samples, from, from+width, f) / width.Seconds()
	}
	return out
}

// SuccessRates is the user success rate per bucket of width by send time
// (users sorted by Sent); NaN where nothing was sent.
func SuccessRates(users []UserRequest, width time.Duration, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		from := time.Duration(i) * width
		sent, ok, _ := countSent(users, from, from+width)
		out[i] = math.NaN()
		if sent > 0 {
			out[i] = float64(ok) / float64(sent)
		}
	}
	return out
}

// countSent counts the user requests sent in [from, to) (users sorted by
// Sent): all of them, the successful and the failed ones.
func countSent(users []UserRequest, from, to time.Duration) (sent, ok, failed int) {
	i := sort.Search(len(users), func(i int) bool { return users[i].Sent >= from })
	for ; i < len(users) && users[i].Sent < to; i++ {
		sent++
		if users[i].OK {
			ok++
		} else {
			failed++
		}
	}
	return sent, ok, failed
}

// PerFailedCount is requests at payment per failed user request, counted exactly: each
// failed user request sent during the outage is joined by its operation id (storm-op) to the
// requests payment received for it (the tier's own records), whenever they came, after the
// restore or after its user gave up included. No rate, window or interpolation is involved:
// the counter a proxy keeps counts an attempt when it ends, and a user request's work at
// payment lasts longer than its user's wait, so any estimate from the counters' deltas reads
// short under a hang.
type PerFailedCount struct {
	// Failed is how many failed user requests sent during the outage were counted; Requests
	// the requests at payment joined to them. Mean is Requests / Failed (0 when Failed is 0),
	// Max the most any one of them caused.
	Failed, Requests int
	Mean             float64
	Max              int
	// Full is the chain's full multiplication (every tier, the edge client included,
	// exhausting its tries: 27 for storm27); AtFull, Below and Above split the counted user
	// requests by whether they caused exactly Full, fewer or more requests at payment.
	Full, AtFull, Below, Above int
	// Unmatched counts requests at payment that carried no operation id, or one of no user
	// request: counted toward no user request (0 in the lab).
	Unmatched int
}

// PerFailedExact counts, for every user request sent in [OutageStart, Restore) that failed,
// the attempts at tier joined to it by Op (attempts at other tiers are ignored); full is the
// chain's full multiplication (Scenario.Amplification). users need not be sorted.
func PerFailedExact(users []UserRequest, attempts []TierAttempt, tier string, tl Timeline, full int) PerFailedCount {
	known := make(map[string]bool, len(users))
	for _, u := range users {
		if u.Op != "" {
			known[u.Op] = true
		}
	}
	perOp := map[string]int{}
	c := PerFailedCount{Full: full}
	for _, a := range attempts {
		if a.Tier != tier {
			continue
		}
		if a.Op == "" || !known[a.Op] {
			c.Unmatched++
			continue
		}
		perOp[a.Op]++
	}
	for _, u := range users {
		if u.OK || u.Sent < tl.OutageStart || u.Sent >= tl.Restore {
			continue
		}
		n := perOp[u.Op]
		if u.Op == "" {
			n = 0 // an op-less user request cannot be joined: nothing is counted for it
		}
		c.Failed++
		c.Requests += n
		c.Max = max(c.Max, n)
		switch {
		case n == full:
			c.AtFull++
		case n < full:
			c.Below++
		default:
			c.Above++
		}
	}
	if c.Failed > 0 {
		c.Mean = float64(c.Requests) / float64(c.Failed)
	}
	return c
}

// RecoveryAfter applies crit to the user requests (sorted by Sent) after
// restore, up to loadEnd.
func RecoveryAfter(users []UserRequest, restore, loadEnd time.Duration, crit RecoveryCriterion) Recovery {
	rec := Recovery{Observed: loadEnd - restore}
	if crit.Step <= 0 || crit.Window <= 0 || crit.Windows < 1 {
		return rec
	}
	span := time.Duration(crit.Windows) * crit.Window
	last := restore
	for t := restore; t+span <= loadEnd; t += crit.Step {
		last = t
		healthy := true
		for k := 0; k < crit.Windows && healthy; k++ {
			from := t + time.Duration(k)*crit.Window
			sent, ok, _ := countSent(users, from, from+crit.Window)
			healthy = sent > 0 && float64(ok) >= crit.MinSuccess*float64(sent)
		}
		if healthy {
			rec.Recovered, rec.After = true, t-restore
			return rec
		}
	}
	rec.LowerBound = last - restore
	return rec
}

// RecoveryRatio is how many times faster the retrycap arm recovered than
// the naive one. atLeast reports that the ratio is a lower bound: the naive
// arm did not recover within the run (its LowerBound is used), or the
// retrycap arm recovered within one step (the step is used as its time).
// ok is false when the retrycap arm did not recover.
func RecoveryRatio(naive, rc Recovery, step time.Duration) (ratio float64, atLeast, ok bool) {
	if !rc.Recovered {
		return 0, false, false
	}
	num := naive.After
	if !naive.Recovered {
		num, atLeast = naive.LowerBound, true
	}
	den := rc.After
	if den < step {
		den, atLeast = step, true
	}
	if den <= 0 {
		return 0, false, false
	}
	return num.Seconds() / den.Seconds(), atLeast, true
}

// Reduction is by how many percent rc is below naive; 0 when naive is 0.
func Reduction(naive, rc float64) float64 {
	if naive <= 0 {
		return 0
	}
	return 100 * (1 - rc/naive)
}

// Target is one of the lab's targets for the retrycap arm.
type Target struct {
	Name string
	Want string
	Got  string
	Met  bool
}

// Wait is the user's wait for an answer (a user request's start to its final answer, success
// or error, or to the edge client giving up at its timeout) over the user requests sent in a
// window, by an exact sort: the lab has thousands of them, not millions.
type Wait struct {
	// N is how many user requests were sent in the window; GaveUp how many of them the edge
	// client gave up on at its timeout, without an answer (the spinner to the end).
	N, GaveUp int
	// P50 and P99 are nearest-rank percentiles (the smallest wait at least q of the requests
	// did not exceed); Max the longest wait. All 0 when N is 0.
	P50, P99, Max time.Duration
}

// WaitOf is the wait of the user requests (sorted by Sent) sent in [from, to).
func WaitOf(users []UserRequest, from, to time.Duration) Wait {
	var w Wait
	var waits []time.Duration
	i := sort.Search(len(users), func(i int) bool { return users[i].Sent >= from })
	for ; i < len(users) && users[i].Sent < to; i++ {
		waits = append(waits, users[i].Done-users[i].Sent)
		if users[i].GaveUp {
			w.GaveUp++
		}
	}
	w.N = len(waits)
	if w.N == 0 {
		return w
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	w.P50, w.P99, w.Max = nearestRank(waits, 50), nearestRank(waits, 99), waits[w.N-1]
	return w
}

// nearestRank is the p-th percentile of sorted (not empty): the value at rank ceil(p/100 x n).
func nearestRank(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)*p+99)/100-1]
}

// TierAttempt is one attempt a proxy of the chain started toward a tier (the entry proxy's
// toward gateway, the gateway proxy's toward order, the order proxy's toward payment), read
// from the proxy's access log.
type TierAttempt struct {
	Tier string        // the service the attempt went to
	Op   string        // the user operation id it carried (storm-op), "" when none
	At   time.Duration // when the proxy started it, after the arm's load began
}

// Orphans are the attempts started at a tier after the user request they served had stopped
// waiting: after its client gave up at its timeout, or after it had its final answer (an error
// the entry proxy answered while a tier below still worked on the call). Nobody reads what
// such an attempt brings back; it only loads the tiers below.
type Orphans struct {
	// Attempts is how many were orphaned, ByTier the same per tier (every tier of the chain
	// listed, 0 included) and Users how many user requests had at least one.
	Attempts int
	ByTier   map[string]int
	Users    int
	// Checked is how many attempts were matched to a user request and judged; Unmatched how
	// many carried no operation id, or one of no user request (0 in the lab: every attempt
	// carries its user request's storm-op).
	Checked, Unmatched int
}

// OrphanedAttempts judges each tier attempt against its user request (joined by Op): it is
// orphaned when it started after the request stopped waiting, at the earlier of its final
// answer (Done) and its client's give-up (Sent + userTimeout). tiers are the chain's tiers,
// listed in ByTier even when none of their attempts was orphaned.
func OrphanedAttempts(users []UserRequest, attempts []TierAttempt, userTimeout time.Duration, tiers []string) Orphans {
	o, _ := orphanedAttempts(users, attempts, userTimeout, tiers)
	return o
}

// orphanedAttempts is OrphanedAttempts with the orphaned attempts per user operation and tier.
func orphanedAttempts(users []UserRequest, attempts []TierAttempt, userTimeout time.Duration, tiers []string) (Orphans, map[string]map[string]int) {
	stopped := make(map[string]time.Duration, len(users))
	for _, u := range users {
		stopped[u.Op] = min(u.Done, u.Sent+userTimeout)
	}
	o := Orphans{ByTier: make(map[string]int, len(tiers))}
	for _, t := range tiers {
		o.ByTier[t] = 0
	}
	orphanedUsers := map[string]map[string]int{}
	for _, a := range attempts {
		end, ok := stopped[a.Op]
		if a.Op == "" || !ok {
			o.Unmatched++
			continue
		}
		o.Checked++
		if a.At > end {
			o.Attempts++
			o.ByTier[a.Tier]++
			if orphanedUsers[a.Op] == nil {
				orphanedUsers[a.Op] = map[string]int{}
			}
			orphanedUsers[a.Op][a.Tier]++
		}
	}
	o.Users = len(orphanedUsers)
	return o, orphanedUsers
}

// waitSlack is what the lab allows between the entry proxy's deadline and the edge client
// reading its answer: the answer's write, the client's read and their scheduling on a shared,
// busy machine (the target and the lab test state it; the proxy answers at its deadline).
const waitSlack = 250 * time.Millisecond

// Judge checks the retrycap arm against the targets: requests at payment
// per failed user request at most the chain cap, for every one of them (the max, counted
// exactly; at least one counted); retries during the outage
// at least 94 % fewer; recovery at least 10x faster; no duplicated POST side
// effects; the user's wait during the outage at p99 within maxTime (the entry
// proxy's --max-time-to-answer) plus waitSlack; no orphaned attempt, with
// attempts checked.
func Judge(naive, rc ArmResult, chainCap int, step, maxTime time.Duration) []Target {
	var ts []Target
	ts = append(ts, perFailedTarget(naive, rc, chainCap))
	red := Reduction(naive.RetriesInOutage, rc.RetriesInOutage)
	ts = append(ts, Target{
		Name: "retries during the outage",
		Want: fmt.Sprintf(">= %d %% fewer", retriesTarget),
		Got:  retriesGot(red, naive.RetriesInOutage, rc.RetriesInOutage),
		Met:  naive.RetriesInOutage > 0 && red >= retriesTarget,
	})
	ratio, atLeast, ok := RecoveryRatio(naive.Recovery, rc.Recovery, step)
	got := "retrycap did not recover"
	if ok {
		got = fmt.Sprintf("%.1fx", ratio)
		if atLeast {
			got = ">= " + got
		}
	}
	ts = append(ts, Target{Name: "time to recover", Want: ">= 10x shorter", Got: got, Met: ok && ratio >= 10})
	dup := fmt.Sprintf("%d (naive %d)", rc.Duplicates, naive.Duplicates)
	if rc.Charges == 0 {
		dup = "not measured (no POST charged)"
	}
	ts = append(ts, Target{
		Name: "duplicated POST side effects",
		Want: "0",
		Got:  dup,
		Met:  rc.Duplicates == 0 && rc.Charges > 0, // none duplicated of none charged proves nothing
	})
	ts = append(ts, Target{
		Name: "user's wait during the outage, p99",
		Want: fmt.Sprintf("<= %s (max time to answer %s + %s)", FormatWait(maxTime+waitSlack), FormatWait(maxTime), FormatWait(waitSlack)),
		Got:  fmt.Sprintf("%s (naive %s)", waitP99(rc.Wait), waitP99(naive.Wait)),
		Met:  rc.Wait.N > 0 && rc.Wait.P99 <= maxTime+waitSlack,
	})
	got = "not measured"
	met := false
	if rc.Orphans != nil {
		got = fmt.Sprintf("%d of %d attempts checked", rc.Orphans.Attempts, rc.Orphans.Checked)
		if naive.Orphans != nil {
			got += fmt.Sprintf(" (naive %d of %d)", naive.Orphans.Attempts, naive.Orphans.Checked)
		}
		met = rc.Orphans.Checked > 0 && rc.Orphans.Attempts == 0
	}
	ts = append(ts, Target{Name: "orphaned attempts (started after the user stopped waiting)", Want: "0", Got: got, Met: met})
	return ts
}

// retriesGot is the retries target's figure: the reduction, or that there was none to measure.
func retriesGot(red, naive, rc float64) string {
	if naive <= 0 {
		return fmt.Sprintf("not measured (naive made no retry; retrycap %.0f)", rc)
	}
	return fmt.Sprintf("%.1f %% fewer (%.0f vs %.0f)", red, rc, naive)
}

// perFailedTarget is the chain cap's target: the most requests at payment any failed user
// request of the outage caused, counted exactly (PerFailedExact), at most the cap. The cap is a
// bound on every user request, so the max is judged, not the mean; no failed user request
// counted (or the count not made) is a miss: nothing was checked.
func perFailedTarget(naive, rc ArmResult, chainCap int) Target {
	t := Target{Name: "requests at payment per failed user request (max, exact)", Want: fmt.Sprintf("<= cap %d", chainCap), Got: "not counted"}
	if rc.PerFailed == nil {
		return t
	}
	p := rc.PerFailed
	if p.Failed == 0 {
		t.Got = "not measured (no user request sent in the outage failed)"
		return t
	}
	t.Got = fmt.Sprintf("%d, mean %.2f, of %d", p.Max, p.Mean, p.Failed)
	if naive.PerFailed != nil {
		t.Got += fmt.Sprintf(" (naive %d, mean %.2f)", naive.PerFailed.Max, naive.PerFailed.Mean)
	}
	t.Met = p.Failed > 0 && p.Max <= chainCap
	return t
}

// FormatPerFailed renders an arm's count for the summary: "27.00 (max 27; 950 of 1000 at 27)",
// then the requests at payment joined to no user request, if any.
func FormatPerFailed(p *PerFailedCount) string {
	if p == nil {
		return "not counted"
	}
	if p.Failed == 0 {
		// No failed user request to divide by: a mean of 0 would read as a measurement.
		return "not measured (no user request sent in the outage failed)"
	}
	s := fmt.Sprintf("%.2f (max %d; %d of %d at %d)", p.Mean, p.Max, p.AtFull, p.Failed, p.Full)
	if p.Unmatched > 0 {
		// Requests at payment no user request could claim: said, never dropped silently.
		s += fmt.Sprintf(", %d at payment unmatched", p.Unmatched)
	}
	return s
}

// FormatWait renders a wait: from a second on in seconds with two decimals ("5.40 s"), below
// in milliseconds ("340 ms", "0.7 ms" under 10 ms): the lab's waits span a fraction of a
// millisecond (a call failed fast) to its user timeout.
func FormatWait(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// notMeasuredWait says that no user request was sent in the window: its percentiles are not
// 0 ms, they are nothing.
const notMeasuredWait = "not measured (no user request sent in the outage)"

// waitP99 is a wait's p99 for a target, or that nothing was measured.
func waitP99(w Wait) string {
	if w.N == 0 {
		return "not measured"
	}
	return FormatWait(w.P99)
}

// formatWaits is a wait's "p50 / p99 (max)", or that nothing was measured.
func formatWaits(w Wait) string {
	if w.N == 0 {
		return notMeasuredWait
	}
	return fmt.Sprintf("%s / %s (%s)", FormatWait(w.P50), FormatWait(w.P99), FormatWait(w.Max))
}

// FormatRecovery renders a Recovery for the summary.
func FormatRecovery(r Recovery) string {
	if r.Recovered {
		return fmt.Sprintf("%.1f s", r.After.Seconds())
	}
	return fmt.Sprintf("did not recover within %.1f s (> %.1f s)", r.Observed.Seconds(), r.LowerBound.Seconds())
}
