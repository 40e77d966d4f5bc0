package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citedSection is a page and a section cited by its title instead of a link, as Go comments
// and some pages do: docs/operating.md, "The proxy's memory after a load". A link's #anchor is
// TestLinksResolve's; this is the same check for the citations a link cannot carry.
// A path that only ends in docs/ (istio.io's content/en/docs/...) is another project's page.
var citedSection = regexp.MustCompile(`(?:^|[^/\w.-])docs/([a-z0-9/_-]+\.md)[,:]? \(?"([^"]{3,100})"`)

// commentLead joins a Go comment's lines, so that a citation wrapped after the page still reads
// as one.
var commentLead = regexp.MustCompile(`\n[ \t]*// ?`)

var boldSpan = regexp.MustCompile(`\*\*([^*]+)\*\*`)

// sectionTitles are a page's headings and the bold lead-ins of its paragraphs (a few pages
// name a paragraph "**The at-most-once matrix** (...)" as its section), lower-cased.
func sectionTitles(md markdown) []string {
	var titles []string
	for i, line := range md.lines {
		if md.code[i] {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			titles = append(titles, strings.ToLower(m[2]))
		}
		for _, b := range boldSpan.FindAllStringSubmatch(line, -1) {
			titles = append(titles, strings.ToLower(b[1]))
		}
	}
	return titles
}

// citedIn returns the citations of text that name no heading or bold lead-in of their page.
func citedIn(t *testing.T, text string, page func(string) (markdown, bool)) (bad []string, n int) {
	t.Helper()
	for _, m := range citedSection.FindAllStringSubmatch(text, -1) {
		rel, title := "docs/"+m[1], strings.ToLower(m[2])
		n++
		md, ok := page(rel)
		if !ok {
			bad = append(bad, rel+" (no such page)")
			continue
		}
		found := false
		for _, h := range sectionTitles(md) {
			if strings.Contains(h, title) {
				found = true
				break
			}
		}
		if !found {
			bad = append(bad, rel+`, "`+m[2]+`"`)
		}
	}
	return bad, n
}

// TestCitedSectionsExist: every `docs/PAGE.md, "Title"` in the Go sources and the markdown
// files names a heading (or a bold paragraph lead-in) of that page that contains the title, so
// a section renamed fails here until the citations follow. Before, a renamed heading left the
// comments citing it pointing at nothing, unchecked.
func TestCitedSectionsExist(t *testing.T) {
	pages := map[string]markdown{}
	page := func(rel string) (markdown, bool) {
		if md, ok := pages[rel]; ok {
			return md, true
		}
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			return markdown{}, false
		}
		md := readMarkdown(t, rel)
		pages[rel] = md
		return md, true
	}
	checked := 0
	check := func(rel, text string) {
		bad, n := citedIn(t, text, page)
		checked += n
		for _, b := range bad {
			t.Errorf("%s cites %s: that page has no such heading or bold lead-in", rel, b)
		}
	}
	for _, rel := range markdownFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		check(rel, strings.ReplaceAll(string(data), "\n", " "))
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "tmp") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".go") || d.Name() == "citations_test.go" { // its cases cite pages that are not there
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		check(filepath.ToSlash(rel), commentLead.ReplaceAllString(string(data), " "))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 15 {
		t.Fatalf("%d cited sections found: the citation pattern no longer matches the sources", checked)
	}
}

// TestCitedIn pins the rule on a page of its own: a heading and a bold lead-in are found, a
// missing title and a missing page are not.
func TestCitedIn(t *testing.T) {
	md := markdown{path: "docs/x.md",
		lines: []string{"# X", "## The proxy's memory after a load (soak)", "**The at-most-once matrix** (a test)", "```", "## In code", "```"},
		code:  []bool{false, false, false, true, true, true}}
	page := func(rel string) (markdown, bool) { return md, rel == "docs/x.md" }
	text := `docs/x.md, "The proxy's memory after a load" docs/x.md "The at-most-once matrix" ` +
		`docs/x.md, "In code" docs/x.md, "Renamed" docs/y.md, "Anything" ` +
		`(istio.io content/en/docs/ops/index.md, "Elsewhere")`
	bad, n := citedIn(t, text, page)
	want := []string{`docs/x.md, "In code"`, `docs/x.md, "Renamed"`, "docs/y.md (no such page)"}
	if n != 5 || strings.Join(bad, "|") != strings.Join(want, "|") {
		t.Errorf("citedIn: %d checked, bad %q; want 5 and %q", n, bad, want)
	}
}

// elsewhereNames are pkg.Name spans the pages cite that are not retrycap's package of that name
// (Istio's mesh package) or are tests (which readDecls leaves out).
var elsewhereNames = []string{
	"mesh.GetDefaultInboundHttpRetryPolicy", // istio.io/istio/pkg/config/mesh
	"workload.TestIncrementalEqualsBuild",   // a test of internal/workload
}

// TestPagesNamesExist: every `pkg.Name` in a code span of README.md and the reference pages in
// docs/ is declared by that retrycap package, as TestArchitectureNamesExist checks for the two
// architecture pages. The history pages (decisions.md, benchmarks.md and docs/benchmarks/) name
// what was there then and are left out. Before, admission.md and services.md cited gate.Change,
// which had moved to internal/index, and grpc.md, proxy.md and storm-lab.md policy.Judge and
// policy.Decide, methods of policy.Policy.
func TestPagesNamesExist(t *testing.T) {
	byName := packagesByName(readDecls(t))
	checked := 0
	for _, rel := range markdownFiles(t) {
		if rel != "README.md" && (!strings.HasPrefix(rel, "docs/") || strings.HasPrefix(rel, "docs/benchmarks") ||
			rel == "docs/decisions.md" || rel == "docs/architecture.md" || rel == "docs/development.md") {
			continue
		}
		md := readMarkdown(t, rel)
		for i, line := range md.lines {
			if md.code[i] {
				continue
			}
			for _, span := range codeSpan.FindAllString(line, -1) {
				for _, e := range elsewhereNames {
					span = strings.ReplaceAll(span, e, "")
				}
				checked += checkQualified(t, fmt.Sprintf("%s:%d", rel, i+1), span, nil, byName)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("%d names checked in the pages' code spans: the spans were not read", checked)
	}
}
