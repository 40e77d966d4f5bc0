package analyze

import (
	"fmt"
	"io"
	"strings"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/workload"
)

// TimeReport is a policy's time along its chains (docs/concepts.md, "Time along the chain"),
// inline in its PolicyReport's JSON.
type TimeReport struct {
	// WorstTimeToAnswer is the longest an entrypoint's client can wait for an answer, a duration
	// ("6.4s") or "unbounded"; "" when there is no chain.
	WorstTimeToAnswer string `json:"worstTimeToAnswer"`
	// WorstTimePath is its chain; WorstTimeUnbounded why it is unbounded.
	WorstTimePath      []string `json:"worstTimePath"`
	WorstTimeUnbounded string   `json:"worstTimeUnbounded,omitempty"`
	// MaxTimeToAnswer is spec.maxTimeToAnswer ("" when unset); WithinMaxTime is false when a
	// chain takes longer (true when unset).
	MaxTimeToAnswer string `json:"maxTimeToAnswer,omitempty"`
	WithinMaxTime   bool   `json:"withinMaxTime"`
	// TimeViolations are the chains over MaxTimeToAnswer, worst first.
	TimeViolations []TimeViolation `json:"timeViolations"`
	// TimeoutInversions name each caller and callee, the largest gap first, at most
	// graph.MaxInversions; TimeoutInversionsTotal counts them all.
	TimeoutInversions      []TimeoutInversion `json:"timeoutInversions"`
	TimeoutInversionsTotal int                `json:"timeoutInversionsTotal"`
}

// TimeViolation is a chain over maxTimeToAnswer.
type TimeViolation struct {
	Path              []string `json:"path"`
	WorstTimeToAnswer string   `json:"worstTimeToAnswer"`
	Message           string   `json:"message"`
}

// TimeoutInversion is a hop whose caller's per-try timeout is shorter than what it waits on.
type TimeoutInversion struct {
	Caller string `json:"caller"`
	Callee string `json:"callee"`
	// Layer is whose per-try timeout it is; Inner what it waits on (the callee, or a mesh layer).
	Layer         string `json:"layer"`
	Inner         string `json:"inner"`
	PerTryTimeout string `json:"perTryTimeout"`
	InnerTime     string `json:"innerTime"`
	Message       string `json:"message"`
	Fix           string `json:"fix"`
}

// timeReport analyses the time along r's chains.
func timeReport(r *workload.Result) TimeReport {
	ta := r.AnalyzeTime()
	tr := TimeReport{WorstTimePath: []string{}, WithinMaxTime: !ta.OverMax(),
		TimeViolations: []TimeViolation{}, TimeoutInversions: []TimeoutInversion{}, TimeoutInversionsTotal: ta.InversionsTotal}
	if ta.Max > 0 {
		tr.MaxTimeToAnswer = graph.FormatTime(ta.Max)
	}
	if len(ta.Chains) > 0 {
		tr.WorstTimeToAnswer = graph.FormatTime(ta.Worst)
		tr.WorstTimePath = ta.WorstPath
		tr.WorstTimeUnbounded = ta.WorstUnbounded
	}
	for _, v := range ta.Violations {
		tr.TimeViolations = append(tr.TimeViolations, TimeViolation{Path: v.Path, WorstTimeToAnswer: graph.FormatTime(v.Time), Message: v.Message})
	}
	for _, inv := range ta.Inversions {
		tr.TimeoutInversions = append(tr.TimeoutInversions, TimeoutInversion{Caller: inv.Caller, Callee: inv.Callee, Layer: inv.Layer, Inner: inv.Inner,
			PerTryTimeout: graph.FormatTime(inv.PerTry), InnerTime: graph.FormatTime(inv.InnerTime), Message: inv.Message, Fix: inv.Fix})
	}
	return tr
}

// SetFailOnInversion makes the timeout inversions errors in SARIF (analyze --fail-on-inversion).
func (r *Report) SetFailOnInversion(on bool) { r.failOnInversion = on }

// OverMaxTime reports whether some policy has a chain over its maxTimeToAnswer (a violation:
// analyze exits 1).
func (r *Report) OverMaxTime() bool {
	for _, p := range r.Policies {
		if !p.WithinMaxTime {
			return true
		}
	}
	return false
}

// TimeoutInversions counts the timeout inversions of every policy (warnings; an error with
// analyze --fail-on-inversion).
func (r *Report) TimeoutInversions() int {
	n := 0
	for _, p := range r.Policies {
		n += p.TimeoutInversionsTotal
	}
	return n
}

// renderTime writes a policy's time lines in the table: the worst time to answer and its chain,
// the chains over maxTimeToAnswer, the inversions with their fixes.
func renderTime(w io.Writer, p *PolicyReport) {
	if p.WorstTimeToAnswer == "" {
		return
	}
	line := fmt.Sprintf("  worst time to answer:\t%s (%s)", p.WorstTimeToAnswer, strings.Join(p.WorstTimePath, " -> "))
	if p.MaxTimeToAnswer != "" {
		line += fmt.Sprintf("  max %s, WITHIN: %s", p.MaxTimeToAnswer, yesNo(p.WithinMaxTime))
	}
	fmt.Fprintln(w, line)
	if p.WorstTimeUnbounded != "" {
		fmt.Fprintf(w, "    unbounded: %s\n", p.WorstTimeUnbounded)
	}
	if len(p.TimeViolations) > 0 {
		fmt.Fprintf(w, "  over maxTimeToAnswer:\n")
		for _, v := range p.TimeViolations {
			fmt.Fprintf(w, "    - %s\n", v.Message)
		}
	}
	if len(p.TimeoutInversions) > 0 {
		if p.TimeoutInversionsTotal > len(p.TimeoutInversions) {
			fmt.Fprintf(w, "  timeout inversions (%d of %d shown):\n", len(p.TimeoutInversions), p.TimeoutInversionsTotal)
		} else {
			fmt.Fprintf(w, "  timeout inversions:\n")
		}
		for _, inv := range p.TimeoutInversions {
			fmt.Fprintf(w, "    - %s\n", inv.Message)
			fmt.Fprintf(w, "      fix: %s\n", inv.Fix)
		}
	}
}

// SARIF rules of the time model.
const (
	RuleOverMaxTime      = "retrycap/over-max-time"
	RuleTimeoutInversion = "retrycap/timeout-inversion"
)

// sarifTime adds a policy's time results: a chain over maxTimeToAnswer an error, an inversion a
// warning (an error with failOnInversion), each at the workload of the caller (else the policy).
func sarifTime(run *sarifRun, p *PolicyReport, failOnInversion bool) {
	at := func(svc string) Source {
		if s, ok := p.serviceSource[svc]; ok {
			return s
		}
		return p.source
	}
	for _, v := range p.TimeViolations {
		first := ""
		if len(v.Path) > 0 {
			first = v.Path[0]
		}
		run.Results = append(run.Results, sarifResult{RuleID: RuleOverMaxTime, Level: "error",
			Message: sarifMessage{Text: p.Title() + ": " + v.Message}, Locations: sarifLocations(at(first))})
	}
	level := "warning"
	if failOnInversion {
		level = "error"
	}
	for _, inv := range p.TimeoutInversions {
		run.Results = append(run.Results, sarifResult{RuleID: RuleTimeoutInversion, Level: level,
			Message: sarifMessage{Text: p.Title() + ": " + inv.Message + "; fix: " + inv.Fix}, Locations: sarifLocations(at(inv.Caller))})
	}
	if p.TimeoutInversionsTotal > len(p.TimeoutInversions) {
		run.Results = append(run.Results, sarifResult{RuleID: RuleTimeoutInversion, Level: "note", Locations: sarifLocations(p.source),
			Message: sarifMessage{Text: p.Title() + ": " + itoa(len(p.TimeoutInversions)) + " of " + itoa(p.TimeoutInversionsTotal) + " timeout inversions shown"}})
	}
}
