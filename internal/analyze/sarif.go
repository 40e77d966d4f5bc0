package analyze

import (
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
)

// SARIF 2.1.0, the subset code-scanning UIs read.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription sarifMessage `json:"shortDescription"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

// SARIF rule IDs.
const (
	RuleOverCap        = "retrycap/over-cap"
	RuleRetryCycle     = "retrycap/retry-cycle"
	RuleNothingChecked = "retrycap/nothing-checked"
	RuleInput          = "retrycap/input"
	// RuleInputError is input that could not be read: nothing was checked.
	RuleInputError = "retrycap/input-error"
)

func sarifLocations(s Source) []sarifLocation {
	if s.File == "" || s.File == "-" || strings.HasPrefix(s.File, "(") {
		return nil
	}
	if dir, ok := strings.CutSuffix(s.File, kustomizeSuffix); ok {
		// Built output has no file: point at the kustomization.
		return []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: filepath.ToSlash(filepath.Join(dir, "kustomization.yaml"))}}}}
	}
	l := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: s.File}}}
	if s.Line > 0 {
		l.PhysicalLocation.Region = &sarifRegion{StartLine: s.Line}
	}
	return []sarifLocation{l}
}

// RenderSARIF writes the report as SARIF 2.1.0 for code-scanning UIs: every violation an error
// at the workload whose annotation the fix changes first (else the policy), a run that checked
// nothing an error at the policy, every warning a warning where it was read.
func RenderSARIF(w io.Writer, rep *Report) error {
	run := newSARIFRun()
	for _, p := range rep.Policies {
		for _, v := range p.Violations {
			rule := RuleOverCap
			if p.Cycle != nil {
				rule = RuleRetryCycle
			}
			text := p.Title() + ": " + v.Message
			if v.Suggestion != "" {
				text += "; fix: " + v.Suggestion
			}
			at := p.source
			svc := ""
			if i := strings.Index(v.Suggestion, ": "); i > 0 && !strings.HasPrefix(v.Suggestion, "no rewrite fits") {
				svc = v.Suggestion[:i]
			} else if len(v.Path) > 0 {
				svc = v.Path[0]
			}
			if s, ok := p.serviceSource[svc]; ok {
				at = s
			}
			run.Results = append(run.Results, sarifResult{RuleID: rule, Level: "error", Message: sarifMessage{Text: text}, Locations: sarifLocations(at)})
		}
		sarifTime(&run, &p, rep.failOnInversion) // time.go
		if p.ViolationsTotal > len(p.Violations) {
			run.Results = append(run.Results, sarifResult{RuleID: RuleOverCap, Level: "note", Locations: sarifLocations(p.source),
				Message: sarifMessage{Text: p.Title() + ": " + itoa(len(p.Violations)) + " of " + itoa(p.ViolationsTotal) + " violations shown; retrycap analyze -o patch gives the whole fix"}})
		}
	}
	for _, u := range rep.Unchecked {
		var at Source
		for _, p := range rep.Policies {
			if strings.HasPrefix(u, p.Title()+" ") || strings.HasPrefix(u, p.Title()+":") {
				at = p.source
			}
		}
		run.Results = append(run.Results, sarifResult{RuleID: RuleNothingChecked, Level: "error", Message: sarifMessage{Text: u}, Locations: sarifLocations(at)})
	}
	for _, wn := range rep.warnings {
		run.Results = append(run.Results, sarifResult{RuleID: RuleInput, Level: "warning", Message: sarifMessage{Text: wn.String()}, Locations: sarifLocations(wn.Source)})
	}
	return writeSARIF(w, run)
}

// newSARIFRun is a run with retrycap's rules and no result yet.
func newSARIFRun() sarifRun {
	return sarifRun{Tool: sarifTool{Driver: sarifDriver{
		Name: "retrycap", InformationURI: "https://github.com/retrycap/retrycap",
		Rules: []sarifRule{
			{ID: RuleOverCap, ShortDescription: sarifMessage{Text: "a call chain multiplies retries past its RetryPolicy's cap"}},
			{ID: RuleRetryCycle, ShortDescription: sarifMessage{Text: "a cycle of calls with a retry in it: amplification unbounded"}},
			{ID: RuleNothingChecked, ShortDescription: sarifMessage{Text: "a RetryPolicy with nothing to check"}},
			{ID: RuleInput, ShortDescription: sarifMessage{Text: "input read, but not as written"}},
			{ID: RuleInputError, ShortDescription: sarifMessage{Text: "input that could not be read: nothing was checked"}},
			{ID: RuleOverMaxTime, ShortDescription: sarifMessage{Text: "a call chain's worst time to answer is over its RetryPolicy's maxTimeToAnswer"}},
			{ID: RuleTimeoutInversion, ShortDescription: sarifMessage{Text: "a caller's per-try timeout is shorter than its callee's worst time: it retries while the callee still works"}},
		},
	}}, Results: []sarifResult{}}
}

func writeSARIF(w io.Writer, run sarifRun) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}})
}

// RenderSARIFErrors writes the input errors that stopped a check as SARIF errors, each where it
// was read (an *InputError's file and document line): a CI job that uploads the SARIF file shows
// why nothing was checked, rather than failing on an empty file.
func RenderSARIFErrors(w io.Writer, errs []error) error {
	run := newSARIFRun()
	for _, err := range errs {
		var at Source
		if ie, ok := errors.AsType[*InputError](err); ok {
			at = ie.Source
		}
		run.Results = append(run.Results, sarifResult{RuleID: RuleInputError, Level: "error", Message: sarifMessage{Text: err.Error()}, Locations: sarifLocations(at)})
	}
	return writeSARIF(w, run)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
