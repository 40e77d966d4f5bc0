package storm

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSummary prints the run: the setup, a table of both arms' figures,
// the targets with met/MISSED, and the verdict.
func (r *Result) WriteSummary(w io.Writer) error {
	o, sc := r.Options, r.Scenario
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "retrycap storm: scenario %s: %s (%s)\n", sc.Name, sc.Chain(), sc.Description)
	if o.Protocol == ProtocolGRPC {
		fmt.Fprintf(ew, "protocol: gRPC (retrycap.lab.Chain over h2c; apps through their proxies with HTTPS_PROXY)\n")
		fmt.Fprintf(ew, "load: %d user requests/s, open loop, %s per arm (3 in 5 Get, 2 in 5 Buy with idempotency-key)\n",
			o.RPS, o.Duration)
	} else {
		fmt.Fprintf(ew, "load: %d user requests/s, open loop, %s per arm (3 in 5 GET, 1 in 5 POST with Idempotency-Key, 1 in 5 POST without)\n",
			o.RPS, o.Duration)
	}
	down := "killed (connections refused)"
	if o.Outage == OutageHang {
		down = "hung (requests read, none answered)"
	}
	fmt.Fprintf(ew, "payment: %d req/s (%d workers x %s, queue %d); %s at %.1f s, restored at %.1f s\n",
		o.Capacity, o.workers(), o.Work, o.queue(), down, r.Timeline.OutageStart.Seconds(), r.Timeline.Restore.Seconds())
	fmt.Fprintf(ew, "arms: naive = %d attempts per hop as declared, retried on any 5xx, reset, refused connection or per-try timeout (Envoy's 5xx policy), no jitter, no budget, no breaker; retrycap = same attempts, chain cap %d, budget, breaker, jitter, max time to answer %s\n",
		sc.Attempts[2], sc.ChainCap, o.MaxTimeToAnswer)
	n3, r3 := perTryTimeouts(ArmNaive), perTryTimeouts(ArmRetrycap)
	fmt.Fprintf(ew, "per-try timeouts from the entry down: naive %s / %s / %s (the entry's shorter than the gateway's worst time: a timeout inversion), retrycap %s / %s / %s (the fix retrycap names); %s\n",
		n3[0], n3[1], n3[2], r3[0], r3[1], r3[2], appsLine(o.Protocol))
	fmt.Fprintf(ew, "user timeout: %s (the edge client gives up on a user request after it, its own retries included)\n\n", o.UserTimeout)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	n, c := r.Naive, r.Retrycap
	fmt.Fprintf(tw, "\tnaive\tretrycap\t\n")
	fmt.Fprintf(tw, "user requests: sent / ok / failed\t%d / %d / %d\t%d / %d / %d\t\n", n.Sent, n.OK, n.Failed, c.Sent, c.OK, c.Failed)
	fmt.Fprintf(tw, "requests at payment during the outage\t%.0f\t%.0f\t\n", n.PaymentInOutage, c.PaymentInOutage)
	fmt.Fprintf(tw, "user requests sent during the outage that failed\t%d\t%d\t\n", n.FailedInOutage, c.FailedInOutage)
	fmt.Fprintf(tw, "requests at payment per failed user request sent during the outage (exact, joined by storm-op): mean (max; at the chain's full product)\t%s\t%s\t\n",
		FormatPerFailed(n.PerFailed), FormatPerFailed(c.PerFailed))
	fewer := fmt.Sprintf("%.1f %% fewer", Reduction(n.RetriesInOutage, c.RetriesInOutage))
	if n.RetriesInOutage <= 0 {
		fewer = "naive made none: no reduction to measure"
	}
	fmt.Fprintf(tw, "retries during the outage (sent by the proxies)\t%.0f\t%.0f (%s)\t\n", n.RetriesInOutage, c.RetriesInOutage, fewer)
	fmt.Fprintf(tw, "  of them, by the %s proxy\t%s\t%s\t\n", strings.Join(HopProxies(), " / "), formatHops(n.HopRetriesInOutage), formatHops(c.HopRetriesInOutage))
	if n.ClientRetriesInOutage+c.ClientRetriesInOutage > 0 {
		fmt.Fprintf(tw, "edge client's own retries during the outage\t%.0f\t%.0f\t\n", n.ClientRetriesInOutage, c.ClientRetriesInOutage)
	}
	fmt.Fprintf(tw, "user's wait for an answer, sent during the outage: p50 / p99 (max)\t%s\t%s\t\n", formatWaits(n.Wait), formatWaits(c.Wait))
	fmt.Fprintf(tw, "  of them, given up at the user's timeout (%s) without an answer\t%d of %d\t%d of %d\t\n",
		FormatWait(o.UserTimeout), n.Wait.GaveUp, n.Wait.N, c.Wait.GaveUp, c.Wait.N)
	if n.Orphans != nil && c.Orphans != nil {
		fmt.Fprintf(tw, "orphaned attempts (started at a tier after the user stopped waiting): %s\t%s\t%s\t\n",
			strings.Join(Tiers(), " / "), formatOrphans(n.Orphans), formatOrphans(c.Orphans))
		fmt.Fprintf(tw, "  user requests with an orphaned attempt\t%d\t%d\t\n", n.Orphans.Users, c.Orphans.Users)
	}
	fmt.Fprintf(tw, "time to recover after payment returns\t%s\t%s\t\n", FormatRecovery(n.Recovery), FormatRecovery(c.Recovery))
	fmt.Fprintf(tw, "POST side effects: charged / replayed by key\t%d / %d\t%d / %d\t\n", n.Charges, n.Replayed, c.Charges, c.Replayed)
	fmt.Fprintf(tw, "duplicated POST side effects\t%d\t%d\t\n", n.Duplicates, c.Duplicates)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("storm summary: %w", err)
	}

	if n.Observed != nil || c.Observed != nil {
		fmt.Fprintf(ew, "\nretrycap observe, on each arm's access logs (per key: Idempotency-Key, else storm-op):\n")
		for _, a := range []ArmResult{n, c} {
			if a.Observed != nil {
				fmt.Fprintf(ew, "  %-9s %s\n", a.Arm+":", a.Observed.Summary())
			}
		}
		if r.Options.AccessLogDir != "" && !r.logsRemoved {
			fmt.Fprintf(ew, "  (logs: retrycap observe -f %s)\n", filepath.Join(r.Options.AccessLogDir, "ARM"))
		}
	}

	fmt.Fprintf(ew, "\ntargets (retrycap arm):\n")
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", t.Name, t.Want, t.Got, verdict)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("storm summary: %w", err)
	}
	if r.Passed() {
		fmt.Fprintf(ew, "result: every target met\n")
	} else {
		fmt.Fprintf(ew, "result: target(s) missed\n")
	}
	if r.ChartPath != "" {
		fmt.Fprintf(ew, "chart: %s\n", r.ChartPath)
	}
	return ew.err
}

// appsLine says how the chain's apps treat a caller that hangs up.
func appsLine(proto string) string {
	if proto == ProtocolGRPC {
		return "the gRPC apps pass the inbound call's deadline and cancellation on (grpc-go does)"
	}
	return "the apps finish their calls when their caller hangs up (as thread-per-request servers do)"
}

// formatOrphans is an arm's orphaned attempts: the total, then per tier ("120 (0 / 30 / 90)").
func formatOrphans(o *Orphans) string {
	if o.Checked == 0 {
		return notMeasuredOrphans
	}
	parts := make([]string, 0, len(o.ByTier))
	for _, t := range Tiers() {
		parts = append(parts, strconv.Itoa(o.ByTier[t]))
	}
	return fmt.Sprintf("%d (%s)", o.Attempts, strings.Join(parts, " / "))
}

// formatHops is a count per proxy of the chain, entry first ("0 / 55 / 354").
func formatHops(v [3]float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " / ")
}

// notMeasuredOrphans says that no attempt was judged: "0 orphaned" would be a pass on nothing.
const notMeasuredOrphans = "not measured (no attempt checked)"

// errWriter keeps the first write error so the summary checks once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("storm summary: %w", err)
	}
	return n, nil
}

// WriteSeries prints both arms second by second: requests/s at payment and
// the user success rate by send time.
func (r *Result) WriteSeries(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "second\tpayment\t\tnaive req/s\tok\tretrycap req/s\tok\t\n")
	for i := range r.Naive.PaymentRate {
		from := time.Duration(i) * time.Second
		state := "up"
		if from+time.Second > r.Timeline.OutageStart && from < r.Timeline.Restore {
			state = "DOWN"
		}
		fmt.Fprintf(tw, "%d\t%s\t\t%.0f\t%s\t%.0f\t%s\t\n", i, state,
			r.Naive.PaymentRate[i], pct(r.Naive.SuccessRate, i), at(r.Retrycap.PaymentRate, i), pct(r.Retrycap.SuccessRate, i))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("storm series: %w", err)
	}
	return nil
}

func at(v []float64, i int) float64 {
	if i < len(v) {
		return v[i]
	}
	return math.NaN()
}

func pct(v []float64, i int) string {
	x := at(v, i)
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", 100*x)
}
