package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// helmFailure is a refusal the chart writes with `fail` (a string, or printf's format).
var helmFailure = regexp.MustCompile(`fail (?:\(printf )?"((?:[^"\\]|\\.)*)"`)

// helmFailsQuote is docs/troubleshooting.md's "**`helm install` fails: `MESSAGE`" (wrapped lines
// joined).
var helmFailsQuote = regexp.MustCompile("\\*\\*`helm install` fails: `([^`]+)`")

// numbers makes a message and a printf format comparable: a run of digits and a verb are both #.
var numbers = regexp.MustCompile(`%[dqsv]|\d+`)

// TestTroubleshootingQuotesHelmsRefusals: each message docs/troubleshooting.md quotes as what
// `helm install` fails with is the start of a refusal the chart's templates write (a closing
// " ..." leaves the rest out), numbers aside. Checked by hand on a fresh node (journey13): the
// default install without cert-manager printed the quoted message.
func TestTroubleshootingQuotesHelmsRefusals(t *testing.T) {
	var fails []string
	templates, err := filepath.Glob(filepath.Join(root, "charts/retrycap/templates/*"))
	if err != nil || len(templates) == 0 {
		t.Fatalf("charts/retrycap/templates: %d files, %v", len(templates), err)
	}
	for _, p := range templates {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range helmFailure.FindAllStringSubmatch(string(data), -1) {
			fails = append(fails, numbers.ReplaceAllString(m[1], "#"))
		}
	}
	if len(fails) < 3 {
		t.Fatalf("%d fail messages read from the chart's templates: the pattern no longer matches", len(fails))
	}
	page := strings.Join(readMarkdown(t, "docs/troubleshooting.md").lines, " ")
	quotes := helmFailsQuote.FindAllStringSubmatch(page, -1)
	if len(quotes) < 2 {
		t.Fatalf("%d `helm install` fails: quotes in docs/troubleshooting.md: the pattern no longer matches", len(quotes))
	}
	for _, q := range quotes {
		quote := strings.TrimSuffix(q[1], " ...")
		want := numbers.ReplaceAllString(quote, "#")
		found := false
		for _, f := range fails {
			found = found || strings.HasPrefix(f, want)
		}
		if !found {
			t.Errorf("docs/troubleshooting.md quotes `helm install` failing with %q, which no `fail` of charts/retrycap/templates writes", quote)
		}
	}
}
