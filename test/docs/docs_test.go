package docs

import (
	"bufio"
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/cli"
	"github.com/retrycap/retrycap/internal/inject"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// root is the repository, from this package's directory.
const root = "../.."

// module is the Go module path every package's import path starts with.
const module = "github.com/retrycap/retrycap/"

// markdown is one documentation file: its path from the root and its lines, with the lines of
// fenced code blocks marked (links and headings there are examples, not links).
type markdown struct {
	path  string
	lines []string
	code  []bool
}

func readMarkdown(t *testing.T, rel string) markdown {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	md := markdown{path: rel, lines: strings.Split(string(data), "\n")}
	fence := ""
	for _, line := range md.lines {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			md.code = append(md.code, true)
		case fence != "" && strings.HasPrefix(trimmed, fence):
			fence = ""
			md.code = append(md.code, true)
		default:
			md.code = append(md.code, fence != "")
		}
	}
	return md
}

// markdownFiles lists every tracked-looking .md file of the repository (README.md, docs/, the
// testdata READMEs), skipping build output and dot directories.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "tmp") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	if !slices.Contains(files, "README.md") || !slices.Contains(files, "docs/architecture.md") {
		t.Fatalf("found %d markdown files without README.md and docs/architecture.md: nothing would be checked", len(files))
	}
	return files
}

var (
	codeSpan  = regexp.MustCompile("`[^`]*`")
	inlineRef = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	htmlAnchr = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	heading   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkText  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// slug is GitHub's anchor for a heading: the rendered text lower-cased, every character that is
// not a letter, a digit, a space, a hyphen or an underscore dropped, spaces made hyphens.
func slug(text string) string {
	text = linkText.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the ids a page's headings (numbered on repeats, as GitHub does) and its explicit
// <a id> tags give.
func anchors(md markdown) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for i, line := range md.lines {
		if md.code[i] {
			continue
		}
		for _, m := range htmlAnchr.FindAllStringSubmatch(line, -1) {
			ids[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			ids[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			ids[s] = true
		}
		seen[s]++
	}
	return ids
}

// TestLinksResolve follows every relative link in every markdown file: the file (or directory)
// must exist, and an #anchor into a markdown file must be one of its headings.
func TestLinksResolve(t *testing.T) {
	pages := map[string]markdown{}
	page := func(rel string) markdown {
		if md, ok := pages[rel]; ok {
			return md
		}
		md := readMarkdown(t, rel)
		pages[rel] = md
		return md
	}
	checked := 0
	for _, rel := range markdownFiles(t) {
		md := page(rel)
		for i, line := range md.lines {
			if md.code[i] {
				continue
			}
			for _, m := range inlineRef.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := rel
				if file != "" {
					dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), file)))
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", rel, i+1, target, dest)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if !anchors(page(dest))[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", rel, i+1, target, dest, anchor)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d relative links: the link pattern no longer matches the docs", checked)
	}
}

// TestSlug pins the anchor rule on headings the docs link to.
func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"A real node", "a-real-node"},
		{"Images: `make images`", "images-make-images"},
		{"Quiet re-measure at the end of the third stage's third session", "quiet-re-measure-at-the-end-of-the-third-stages-third-session"},
		{"Timings (measured 2026-12-02 on this 2-core machine)", "timings-measured-2026-12-02-on-this-2-core-machine"},
		{"The [proxy](proxy.md) flags", "the-proxy-flags"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// pkg is one package of the module as the go command lists it (test files left out, as the
// build sees it).
type pkg struct {
	path    string   // relative to the module: internal/graph, cmd/manager
	imports []string // the module's own packages it imports, relative
	client  bool     // links client-go or controller-runtime, directly or not
}

func goList(t *testing.T) map[string]pkg {
	t.Helper()
	if listed != nil {
		return listed
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 || !strings.HasPrefix(fields[0], module) {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		p := pkg{path: strings.TrimPrefix(fields[0], module)}
		for _, imp := range strings.Fields(fields[1]) {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				p.imports = append(p.imports, rel)
			}
		}
		for _, dep := range strings.Fields(fields[2]) {
			if strings.HasPrefix(dep, "k8s.io/client-go/") || strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime") {
				p.client = true
			}
		}
		pkgs[p.path] = p
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list ./... listed %d packages: nothing to compare the docs with", len(pkgs))
	}
	listed = pkgs
	return pkgs
}

// listed is goList's answer, listed once for the tests that read it (none changes it).
var listed map[string]pkg

// section returns the lines of md from the heading whose text is title up to the next heading
// of the same or a higher level.
func section(t *testing.T, md markdown, title string) []string {
	t.Helper()
	start, level := -1, 0
	for i, line := range md.lines {
		if md.code[i] {
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if start >= 0 && len(m[1]) <= level {
			return md.lines[start:i]
		}
		if start < 0 && m[2] == title {
			start, level = i+1, len(m[1])
		}
	}
	if start < 0 {
		t.Fatalf("%s: no section %q", md.path, title)
	}
	return md.lines[start:]
}

var namedPath = regexp.MustCompile("`((?:internal|api|cmd|test)/[A-Za-z0-9_./-]*[A-Za-z0-9_])/?`")

// TestDevelopmentLayoutNamesEveryPackage: docs/development.md's layout names every package of the
// module (hack/'s tools are one row) and nothing that does not exist.
func TestDevelopmentLayoutNamesEveryPackage(t *testing.T) {
	pkgs := goList(t)
	md := readMarkdown(t, "docs/development.md")
	named := map[string]bool{}
	for _, line := range section(t, md, "Layout") {
		for _, m := range namedPath.FindAllStringSubmatch(line, -1) {
			named[m[1]] = true
		}
	}
	for path := range named {
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("docs/development.md, Layout: names %s, which does not exist", path)
		}
	}
	var missing []string
	for path := range pkgs {
		if !strings.HasPrefix(path, "hack/") && !named[path] {
			missing = append(missing, path)
		}
	}
	slices.Sort(missing)
	for _, path := range missing {
		t.Errorf("docs/development.md, Layout: package %s is not named", path)
	}
}

// architectureRow is one row of docs/architecture.md's "Who calls whom".
type architectureRow struct {
	line               int
	pkg                string // relative to internal/
	pure               bool
	imports, importers []string
}

func architectureTable(t *testing.T) []architectureRow {
	t.Helper()
	md := readMarkdown(t, "docs/architecture.md")
	lines := section(t, md, "Who calls whom")
	first := slices.Index(md.lines, lines[0])
	var rows []architectureRow
	for i, line := range lines {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) != 3 {
			t.Fatalf("docs/architecture.md:%d: %d cells, want 3 (package, imports, imported by)", first+i+1, len(cells))
		}
		name := codeSpan.FindString(cells[0])
		row := architectureRow{
			line: first + i + 1,
			pkg:  strings.Trim(name, "`"),
			pure: strings.Contains(cells[0], "*pure*"),
		}
		list := func(cell string) []string {
			cell = strings.TrimSpace(cell)
			if cell == "-" {
				return nil
			}
			var out []string
			for _, item := range strings.Split(cell, ",") {
				out = append(out, strings.TrimSpace(item))
			}
			slices.Sort(out)
			return out
		}
		row.imports, row.importers = list(cells[1]), list(cells[2])
		rows = append(rows, row)
	}
	if len(rows) < 20 {
		t.Fatalf("docs/architecture.md, Who calls whom: %d rows: the table's shape changed, nothing would be checked", len(rows))
	}
	return rows
}

// infrastructure are the packages the architecture table leaves out: tests' helpers and
// harnesses, and the tools under hack/ and test/.
func infrastructure(path string) bool {
	switch {
	case strings.HasPrefix(path, "test/"), strings.HasPrefix(path, "hack/"), strings.HasPrefix(path, "api/"),
		strings.HasSuffix(path, "test"), // proxytest, operatortest, promtest, workloadtest, nametest
		path == "internal/mesh/crds", path == "internal/meshwatch/agree", path == "internal/proxy/h2/grpcbench":
		return true
	}
	return false
}

// short names a package as the architecture table does: internal/ dropped, cmd/ kept.
func short(path string) string { return strings.TrimPrefix(path, "internal/") }

// TestArchitectureImportsMatchCode: one row per package of internal/ (test infrastructure left
// out), with exactly the module's packages it imports (api/ left out, as the page says) and
// exactly those that import it; a row marked *pure* links no Kubernetes client.
func TestArchitectureImportsMatchCode(t *testing.T) {
	pkgs := goList(t)
	rows := architectureTable(t)
	documented := map[string]bool{}
	for _, row := range rows {
		path := "internal/" + row.pkg
		p, ok := pkgs[path]
		if !ok {
			t.Errorf("docs/architecture.md:%d: %s is not a package", row.line, path)
			continue
		}
		if documented[path] {
			t.Errorf("docs/architecture.md:%d: %s has a second row", row.line, path)
		}
		documented[path] = true
		var imports, importers []string
		for _, imp := range p.imports {
			if !strings.HasPrefix(imp, "api/") {
				imports = append(imports, short(imp))
			}
		}
		for _, q := range pkgs {
			if !infrastructure(q.path) && slices.Contains(q.imports, path) {
				importers = append(importers, short(q.path))
			}
		}
		slices.Sort(imports)
		slices.Sort(importers)
		if !slices.Equal(row.imports, imports) {
			t.Errorf("docs/architecture.md:%d: %s imports %s, the page says %s", row.line, row.pkg, show(imports), show(row.imports))
		}
		if !slices.Equal(row.importers, importers) {
			t.Errorf("docs/architecture.md:%d: %s is imported by %s, the page says %s", row.line, row.pkg, show(importers), show(row.importers))
		}
		if row.pure && p.client {
			t.Errorf("docs/architecture.md:%d: %s is marked pure but links a Kubernetes client (client-go or controller-runtime)", row.line, row.pkg)
		}
	}
	var missing []string
	for path := range pkgs {
		if strings.HasPrefix(path, "internal/") && !infrastructure(path) && !documented[path] {
			missing = append(missing, path)
		}
	}
	slices.Sort(missing)
	for _, path := range missing {
		t.Errorf("docs/architecture.md, Who calls whom: no row for %s", path)
	}
}

func show(list []string) string {
	if len(list) == 0 {
		return "-"
	}
	return strings.Join(list, ", ")
}

var (
	makeTarget = regexp.MustCompile(`^([A-Za-z0-9_-]+):`)
	makeUse    = regexp.MustCompile("(?:^|`|\\$ )make ([a-z][a-z0-9-]*(?: [a-z][a-z0-9-]*)*)")
)

// TestMakeTargetsExist: every `make TARGET` the README and the docs tell a user to run is a
// target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := makeTarget.FindStringSubmatch(line); m != nil {
			targets[m[1]] = true
		}
	}
	checked := 0
	for _, rel := range markdownFiles(t) {
		md := readMarkdown(t, rel)
		for i, line := range md.lines {
			for _, m := range makeUse.FindAllStringSubmatch(strings.TrimSpace(line), -1) {
				for _, target := range strings.Fields(m[1]) {
					checked++
					if !targets[target] {
						t.Errorf("%s:%d: make %s: the Makefile has no target %q", rel, i+1, target, target)
					}
				}
			}
		}
	}
	for _, want := range []string{"demo", "demo-node", "test", "test-node"} {
		if !targets[want] {
			t.Errorf("the Makefile has no target %q (the README's quickstart)", want)
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d make commands in the docs: the pattern no longer matches", checked)
	}
}

// crdFields lists the field paths of a CRD's openAPI schema under prefix (spec, status): leaves
// as spec.retry.backoff.base, list items as spec.entrypoints[].service; a selector is one field.
// depth 1 stops at the top level (status.chains, not status.chains[].path).
func crdFields(node map[string]any, path string, depth int, out *[]string) {
	props, _ := node["properties"].(map[string]any)
	if items, ok := node["items"].(map[string]any); ok && node["type"] == "array" {
		props, _ = items["properties"].(map[string]any)
		if props != nil {
			path += "[]"
		}
	}
	if props == nil || depth == 0 || strings.HasSuffix(strings.ToLower(path), "selector") {
		*out = append(*out, strings.TrimSuffix(path, "[]"))
		return
	}
	for name, child := range props {
		crdFields(child.(map[string]any), path+"."+name, depth-1, out)
	}
}

var docField = regexp.MustCompile("`((?:spec|status)\\.[A-Za-z0-9_.\\[\\]]+|\\.[A-Za-z0-9_]+)`")

// TestAPIFieldsDocumented: every field of the RetryPolicy CRD's spec (to its leaves) and status
// (its top level) has a row in docs/api.md's table, and the table names no field the CRD lacks.
// A row may name siblings short: "`spec.retry.backoff.base`, `.max`".
func TestAPIFieldsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "config/crd/bases/retrycap.dev_retrypolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("the RetryPolicy CRD: %v", err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the RetryPolicy CRD has %d versions, want 1", len(crd.Spec.Versions))
	}
	top, _ := crd.Spec.Versions[0].Schema.OpenAPIV3Schema["properties"].(map[string]any)
	var fields []string
	for _, part := range []struct {
		name  string
		depth int
	}{{"spec", -1}, {"status", 1}} {
		node, ok := top[part.name].(map[string]any)
		if !ok {
			t.Fatalf("the RetryPolicy CRD has no %s", part.name)
		}
		crdFields(node, part.name, part.depth, &fields)
	}
	md := readMarkdown(t, "docs/api.md")
	documented := map[string]int{}
	for i, line := range section(t, md, "Fields") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(strings.Trim(line, "|"), "|", 2)[0]
		prev := ""
		for _, m := range docField.FindAllStringSubmatch(first, -1) {
			name := m[1]
			if strings.HasPrefix(name, ".") {
				name = prev[:strings.LastIndex(prev, ".")] + name
			}
			prev = name
			documented[strings.TrimSuffix(name, "[]")] = i
		}
	}
	for _, f := range fields {
		if _, ok := documented[f]; !ok {
			t.Errorf("docs/api.md, Fields: no row for %s (the CRD has it)", f)
		}
	}
	for f := range documented {
		if !slices.Contains(fields, f) {
			t.Errorf("docs/api.md, Fields: a row for %s, which the CRD does not have", f)
		}
	}
	if len(fields) < 30 {
		t.Fatalf("%d fields in the CRD: the schema walk found nothing to check", len(fields))
	}
}

var (
	cliUse  = regexp.MustCompile(`(?:^|[\s` + "`" + `(/])(?:kubectl )?retrycap (analyze|graph|observe|discover|storm|demo)\b([^` + "`" + `|;)#]*)`)
	cliFlag = regexp.MustCompile(`(?:^|\s)(--[a-z][a-z0-9-]*|-[a-zA-Z])\b`)
)

// TestCLIFlagsExist: every flag the README and the docs pass to `retrycap analyze|graph|observe|
// discover` (or `kubectl retrycap ...`), up to the end of the code span or a pipe, is a flag of
// that command, so that a command copied from the docs does not fail with "unknown flag".
func TestCLIFlagsExist(t *testing.T) {
	cmds := map[string]*cobra.Command{}
	for _, c := range []*cobra.Command{
		cli.NewAnalyzeCmd(nil, io.Discard, io.Discard), cli.NewGraphCmd(nil, io.Discard, io.Discard),
		cli.NewObserveCmd(nil, io.Discard, io.Discard), cli.NewDiscoverCmd(nil, io.Discard, io.Discard),
	} {
		cmds[c.Name()] = c
	}
	// storm and demo are the full CLI's own (package main, cmd/retrycap): their flags are read
	// from the flag definitions in its source.
	for name, file := range map[string]string{"storm": "cmd/retrycap/storm.go", "demo": "cmd/retrycap/demo.go"} {
		cmds[name] = sourceFlags(t, name, file)
	}
	checked, values := 0, 0
	for _, rel := range markdownFiles(t) {
		md := readMarkdown(t, rel)
		for i, line := range md.lines {
			for _, m := range cliUse.FindAllStringSubmatch(line, -1) {
				c := cmds[m[1]]
				for _, f := range cliFlag.FindAllStringSubmatch(m[2], -1) {
					checked++
					name := f[1]
					var found bool
					if long, ok := strings.CutPrefix(name, "--"); ok {
						found = c.Flags().Lookup(long) != nil || long == "help"
					} else {
						found = c.Flags().ShorthandLookup(name[1:]) != nil || name == "-h"
					}
					if !found {
						t.Errorf("%s:%d: retrycap %s %s: the command has no such flag", rel, i+1, m[1], name)
					}
				}
				values += checkFlagValues(t, fmt.Sprintf("%s:%d: retrycap %s", rel, i+1, m[1]), c, m[2])
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked %d flags in the docs' retrycap commands: the pattern no longer matches", checked)
	}
	if values < 10 {
		t.Fatalf("checked %d values of -o, --outage, --protocol and --dialect in the docs: the pattern no longer matches", values)
	}
}

// enumFlags take one of a few words, each named in the flag's usage ("output format: table,
// json, ..."): a value the docs give them must be one of those words.
var enumFlags = map[string]bool{"output": true, "outage": true, "protocol": true, "dialect": true}

// checkFlagValues checks the values the docs give c's enumFlags in args (`-o json`, `--output=json`,
// `-o table|json|dot`; a placeholder in capitals is not a value) and returns how many it checked.
func checkFlagValues(t *testing.T, where string, c *cobra.Command, args string) int {
	t.Helper()
	n := 0
	fields := strings.Fields(args)
	for i, tok := range fields {
		name, val, inline := strings.Cut(tok, "=")
		var f *pflag.Flag
		if long, ok := strings.CutPrefix(name, "--"); ok {
			f = c.Flags().Lookup(long)
		} else if short, ok := strings.CutPrefix(name, "-"); ok && len(short) == 1 {
			f = c.Flags().ShorthandLookup(short)
		}
		if f == nil || !enumFlags[f.Name] {
			continue
		}
		if !inline {
			if i+1 >= len(fields) {
				continue
			}
			val = fields[i+1]
		}
		val = strings.Trim(val, "`'\"[],")
		if val == "" || strings.ToUpper(val) == val || strings.Contains(val, "...") {
			continue
		}
		for _, alt := range strings.Split(val, "|") {
			n++
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(alt) + `\b`).MatchString(f.Usage) {
				t.Errorf("%s --%s %s: not a value of the flag (its usage: %q)", where, f.Name, alt, f.Usage)
			}
		}
	}
	return n
}

// flagDef is a pflag definition call: f.StringVar(&x, "name", ...), f.BoolVarP(&x, "name", "n",
// ...), cmd.Flags().Duration("name", ...).
var flagDef = regexp.MustCompile(`^(String|StringArray|StringSlice|Bool|Int|Int64|Uint|Uint64|Float64|Duration)?(Var)?(P)?$`)

// sourceFlags is a command holding the flags defined in file (a command of package main, which
// no test outside it can import): every flag definition call, read with go/parser. It fails
// when it finds too few, so that a change of style does not leave nothing checked.
func sourceFlags(t *testing.T, name, file string) *cobra.Command {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, file), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{Use: name}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		m := flagDef.FindStringSubmatch(sel.Sel.Name)
		if m == nil || len(call.Args) < 3 { // a definition has a name, a default and a usage (not Value.String())
			return true
		}
		var lits []string
		for _, a := range call.Args {
			if b, ok := a.(*ast.BasicLit); ok && b.Kind == token.STRING {
				v, err := strconv.Unquote(b.Value)
				if err != nil {
					t.Fatal(err)
				}
				lits = append(lits, v)
			}
		}
		if len(lits) == 0 {
			t.Fatalf("%s: %s without a literal flag name", file, sel.Sel.Name)
		}
		short, usage := "", ""
		if m[3] == "P" {
			short = lits[1]
		}
		if min := map[bool]int{true: 3, false: 2}[m[3] == "P"]; len(lits) >= min {
			usage = lits[len(lits)-1] // a computed usage ("preset: " + names) is its literal part
		}
		cmd.Flags().BoolP(lits[0], short, false, usage)
		return true
	})
	if n := len(cmd.Flags().FlagUsages()); n == 0 {
		t.Fatalf("%s: no flag definition found", file)
	}
	return cmd
}

// TestSourceFlags: the flags read from the source are the command's (a check of sourceFlags).
func TestSourceFlags(t *testing.T) {
	var names []string
	sourceFlags(t, "demo", "cmd/retrycap/demo.go").Flags().VisitAll(func(f *pflag.Flag) {
		names = append(names, "--"+f.Name+"/"+f.Shorthand)
	})
	if got, want := strings.Join(names, " "), "--chart/ --exit/ --verbose/v"; got != want {
		t.Fatalf("demo's flags: %s, want %s", got, want)
	}
	storm := sourceFlags(t, "storm", "cmd/retrycap/storm.go")
	n := 0
	storm.Flags().VisitAll(func(*pflag.Flag) { n++ })
	if n < 15 || storm.Flags().ShorthandLookup("o") == nil || storm.Flags().Lookup("scenario") == nil {
		t.Fatalf("storm: %d flags read, want at least 15 with --scenario and -o", n)
	}
}

var tableFlag = regexp.MustCompile("`--([a-z0-9-]+)`")

// TestManagerFlagsDocumented: docs/operating.md's Flags table has a row for every flag of the
// manager (cmd/manager/main.go, read from its source) and names none it lacks. Before: three
// (--mesh-apis, --mesh-recheck-interval, --istio-default-retries) were only in meshes.md.
func TestManagerFlagsDocumented(t *testing.T) {
	manager := sourceFlags(t, "manager", "cmd/manager/main.go")
	var code []string
	manager.Flags().VisitAll(func(f *pflag.Flag) { code = append(code, f.Name) })
	var doc []string
	for _, line := range section(t, readMarkdown(t, "docs/operating.md"), "Flags") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		first := strings.SplitN(strings.Trim(line, "|"), "|", 2)[0]
		for _, m := range tableFlag.FindAllStringSubmatch(first, -1) {
			doc = append(doc, m[1])
		}
	}
	flagsBothWays(t, "docs/operating.md, Flags", "the manager", code, doc)
	if len(code) < 25 {
		t.Fatalf("%d flags read from cmd/manager/main.go: the pattern no longer matches", len(code))
	}
}

// TestProxyFlagsDocumented: docs/proxy.md's "Command line" lists every flag of retrycap-proxy
// (internal/sidecar's flag set, the one the proxy parses and the injector renders) and names
// none it lacks. Before: --namespace, --max-time-to-answer and --loop-spin were missing there.
func TestProxyFlagsDocumented(t *testing.T) {
	var code []string
	sidecar.NewFlagSet(&sidecar.Args{}, io.Discard).VisitAll(func(f *pflag.Flag) { code = append(code, f.Name) })
	var doc []string
	for _, line := range section(t, readMarkdown(t, "docs/proxy.md"), "Command line") {
		for _, m := range tableFlag.FindAllStringSubmatch(line, -1) {
			doc = append(doc, m[1])
		}
	}
	flagsBothWays(t, "docs/proxy.md, Command line", "retrycap-proxy", code, doc)
	if len(code) < 30 {
		t.Fatalf("%d proxy flags: the flag set was not read", len(code))
	}
}

// flagsBothWays reports each flag of the program (code) a doc section (where) does not list, and
// each flag it lists that the program does not have.
func flagsBothWays(t *testing.T, where, program string, code, doc []string) {
	t.Helper()
	for _, name := range code {
		if !slices.Contains(doc, name) {
			t.Errorf("%s: %s's --%s is not listed", where, program, name)
		}
	}
	for _, name := range doc {
		if !slices.Contains(code, name) {
			t.Errorf("%s: --%s, which %s does not have", where, name, program)
		}
	}
}

// shownCall is a command line shown in a docs code block with its output below it: "$ retrycap
// analyze ...", also as bin/retrycap or kubectl retrycap, optionally ending "# exit N".
var shownCall = regexp.MustCompile(`^\$ (?:bin/retrycap|retrycap|kubectl retrycap) (analyze|observe|discover)((?: [^|<>;&#]*?)?)\s*(?:#\s*exit (\d))?$`)

// update rewrites the output lines the docs show below a `$ retrycap ...` line with what the
// command prints (go test ./test/docs -run TestShownOutputIsPrinted -update), keeping each
// block's "..." and the number of lines shown on either side of it; review the diff.
var update = flag.Bool("update", false, "rewrite the docs' shown command output with what the commands print")

// TestShownOutputIsPrinted: a code block that shows `$ retrycap analyze|observe|discover ...`
// (commands that need no cluster, run with -f or -k; stdin empty) shows what the command prints today (stdout and stderr as
// a terminal shows them): the command is run in process from the repository's root, and each
// line below it, up to the block's end or the next "$ " line, must be the output's line at that
// place; a line "..." leaves lines out: the ones after it are the output's last. With "# exit N"
// the exit status must be N, without it 0 (a reader takes a block without one for a success).
// Before docs19, observe.md's answers to Envoy's TCP lines and to a proxy without its access log
// were quoted without the command, "(the first: ...)" standing for a path, and checked by
// nothing. Before, docs/cli.md's and observe.md's sample outputs were checked by
// nothing.
func TestShownOutputIsPrinted(t *testing.T) {
	dir, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var docs []markdown
	for _, rel := range markdownFiles(t) {
		docs = append(docs, readMarkdown(t, rel))
	}
	t.Chdir(dir) // the commands name the repository's paths (config/samples)
	checked := 0
	edits := map[string][]edit{} // -update's, per doc
	for _, md := range docs {
		rel := md.path
		for i := 0; i < len(md.lines); i++ {
			m := shownCall.FindStringSubmatch(md.lines[i])
			if m == nil || !md.code[i] {
				continue
			}
			var out bytes.Buffer
			r := cli.NewRoot(strings.NewReader(""), &out, &out)
			r.AddCommand(cli.NewAnalyzeCmd(strings.NewReader(""), &out, &out), cli.NewObserveCmd(strings.NewReader(""), &out, &out),
				cli.NewDiscoverCmd(strings.NewReader(""), &out, &out))
			code := cli.Execute(r, append([]string{m[1]}, strings.Fields(m[2])...))
			where := fmt.Sprintf("%s:%d: %s", rel, i+1, strings.TrimPrefix(md.lines[i], "$ "))
			if want := cmp.Or(m[3], "0"); strconv.Itoa(code) != want {
				t.Errorf("%s: exit %d, the doc says %s", where, code, want)
			}
			got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			var head, tail []string
			var headAt, tailAt []int // the doc's line index of each
			elided := false
			for j := i + 1; j < len(md.lines) && md.code[j] && !strings.HasPrefix(strings.TrimSpace(md.lines[j]), "```") && !strings.HasPrefix(md.lines[j], "$ "); j++ {
				switch {
				case md.lines[j] == "...":
					elided = true
				case elided:
					tail, tailAt = append(tail, md.lines[j]), append(tailAt, j)
				default:
					head, headAt = append(head, md.lines[j]), append(headAt, j)
				}
			}
			if *update {
				edits[rel] = append(edits[rel], rewrite(got, headAt, tailAt, elided, i)...)
				checked++
				continue
			}
			if len(head)+len(tail) > len(got) || !elided && len(head) != len(got) {
				t.Errorf("%s: the doc shows %d lines, the command printed %d (a line \"...\" leaves some out):\n%s", where, len(head)+len(tail), len(got), out.String())
			}
			for k, line := range head {
				if k < len(got) && got[k] != line {
					t.Errorf("%s: line %d:\n  doc:     %q\n  printed: %q", where, k+1, line, got[k])
				}
			}
			for k, line := range tail {
				if at := len(got) - len(tail) + k; at >= 0 && got[at] != line {
					t.Errorf("%s: line %d from the end:\n  doc:     %q\n  printed: %q", where, len(tail)-k, line, got[at])
				}
			}
			if len(head)+len(tail) == 0 {
				t.Errorf("%s: no output shown below the command", where)
			}
			checked++
		}
	}
	if checked < 7 {
		t.Fatalf("%d `$ retrycap analyze|observe|discover` blocks with their output found in the docs, want 7 or more: the pattern no longer matches", checked)
	}
	for _, md := range docs {
		if len(edits[md.path]) == 0 {
			continue
		}
		lines := md.lines
		es := edits[md.path]
		slices.SortFunc(es, func(a, b edit) int { return b.from - a.from }) // from the end: the indices before stay right
		for _, e := range es {
			lines = slices.Concat(lines[:e.from], e.lines, lines[e.to:])
		}
		if err := os.WriteFile(md.path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// edit replaces a doc's lines [from, to) with lines.
type edit struct {
	from, to int
	lines    []string
}

// rewrite is the edits that put got into a block whose output lines are at headAt and, after a
// "...", tailAt: with a "...", the same number of lines on each side of it; without, the whole
// output, lines added or removed.
func rewrite(got []string, headAt, tailAt []int, elided bool, call int) []edit {
	if !elided {
		return []edit{{from: call + 1, to: call + 1 + len(headAt), lines: got}}
	}
	var edits []edit
	for k, j := range headAt {
		if k < len(got) {
			edits = append(edits, edit{from: j, to: j + 1, lines: []string{got[k]}})
		}
	}
	for k, j := range tailAt {
		if at := len(got) - len(tailAt) + k; at >= 0 {
			edits = append(edits, edit{from: j, to: j + 1, lines: []string{got[at]}})
		}
	}
	return edits
}

// valuePaths adds to out the dotted path of every key of a values tree, maps and leaves alike.
func valuePaths(node map[string]any, prefix string, out map[string]bool) {
	for k, v := range node {
		out[prefix+k] = true
		if m, ok := v.(map[string]any); ok {
			valuePaths(m, prefix+k+".", out)
		}
	}
}

// schemaPaths adds to out the dotted path of every property the schema names itself (a $ref'd
// definition's own properties are its business, not a value's name).
func schemaPaths(node map[string]any, prefix string, out map[string]bool) {
	props, _ := node["properties"].(map[string]any)
	for k, v := range props {
		out[prefix+k] = true
		if m, ok := v.(map[string]any); ok {
			schemaPaths(m, prefix+k+".", out)
		}
	}
}

var tableValue = regexp.MustCompile("`(\\.?[A-Za-z][A-Za-z0-9_.]*)`")

// TestHelmValuesDocumented: docs/helm.md's Values table names every value of the chart's
// values.yaml (a row for a map covers its keys: `resources`), and names none that values.yaml
// lacks; values.schema.json names no value values.yaml lacks (`global` excepted: a parent
// chart's). A row's `.x` after `a.b` is `a.x`.
func TestHelmValuesDocumented(t *testing.T) {
	var values map[string]any
	data, err := os.ReadFile(filepath.Join(root, "charts/retrycap/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	inValues := map[string]bool{}
	valuePaths(values, "", inValues)

	var documented []string
	for _, line := range section(t, readMarkdown(t, "docs/helm.md"), "Values") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(strings.Trim(line, "|"), "|", 2)[0]
		last := ""
		for _, m := range tableValue.FindAllStringSubmatch(first, -1) {
			name := m[1]
			if strings.HasPrefix(name, ".") {
				if i := strings.LastIndex(last, "."); i >= 0 {
					name = last[:i] + name
				} else {
					t.Errorf("docs/helm.md, Values: %q follows no dotted value", m[1])
				}
			}
			last = name
			documented = append(documented, name)
			if !inValues[name] {
				t.Errorf("docs/helm.md, Values: `%s` is not a value of charts/retrycap/values.yaml", name)
			}
		}
	}
	for path := range inValues {
		covered := false
		for _, d := range documented {
			covered = covered || path == d || strings.HasPrefix(path, d+".")
		}
		// A map is covered when every key under it is (`image` by `image.repository`, ...).
		if !covered && !slices.ContainsFunc(documented, func(d string) bool { return strings.HasPrefix(d, path+".") }) {
			t.Errorf("docs/helm.md, Values: charts/retrycap/values.yaml's `%s` has no row", path)
		}
	}
	if len(documented) < 30 {
		t.Fatalf("%d values read from docs/helm.md's Values table: the pattern no longer matches", len(documented))
	}

	var schema map[string]any
	data, err = os.ReadFile(filepath.Join(root, "charts/retrycap/values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	inSchema := map[string]bool{}
	schemaPaths(schema, "", inSchema)
	for path := range inSchema {
		if !inValues[path] && path != "global" {
			t.Errorf("charts/retrycap/values.schema.json names `%s`, which values.yaml lacks (a value a user cannot find)", path)
		}
	}
}

// TestReadmeListsEveryPage: README.md's Documentation table links every page of docs/ (its
// benchmarks/ pages through docs/benchmarks.md). services.md and telemetry.md were reachable
// only from other pages.
func TestReadmeListsEveryPage(t *testing.T) {
	table := strings.Join(section(t, readMarkdown(t, "README.md"), "Documentation"), "\n")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) < 10 {
		t.Fatalf("docs/*.md: %d pages, %v", len(pages), err)
	}
	for _, p := range pages {
		rel := "docs/" + filepath.Base(p)
		if !strings.Contains(table, "]("+rel+")") {
			t.Errorf("README.md, Documentation: no row links %s", rel)
		}
	}
}

// TestAnnotationsDocumented: docs/annotations.md names every retrycap.dev/ annotation and label
// retrycap reads or writes on workloads, pods and namespaces. Before, the injector's
// retrycap.dev/injection-warnings and the namespace label retrycap.dev/injection were only in
// admission.md's prose.
func TestAnnotationsDocumented(t *testing.T) {
	doc := strings.Join(readMarkdown(t, "docs/annotations.md").lines, "\n")
	for _, key := range []string{annotations.Service, annotations.Upstreams, annotations.Inject, annotations.RewrittenFrom,
		annotations.InjectedStatus, annotations.InjectionLabel + "=" + annotations.InjectionEnabled, inject.SkippedAnnotation, inject.WarningsAnnotation} {
		if !strings.Contains(doc, "`"+key+"`") {
			t.Errorf("docs/annotations.md does not name `%s`", key)
		}
	}
}

// TestCLIFlagsDocumented: every flag of `retrycap analyze|graph|observe|discover|demo` is named
// in the docs (as `--long` or its `-s` shorthand, in a code span or block), and every flag of
// `retrycap storm` in docs/storm-lab.md's Flags table. Before, six of storm's (--duration,
// --outage-start, --outage-length, --series, --proxy-binary, --no-progress) were in its --help only.
func TestCLIFlagsDocumented(t *testing.T) {
	var all []string
	for _, rel := range markdownFiles(t) {
		if rel == "README.md" || strings.HasPrefix(rel, "docs/") {
			all = append(all, readMarkdown(t, rel).lines...)
		}
	}
	docs := strings.Join(all, "\n")
	named := func(text string, f *pflag.Flag) bool {
		if regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `\b`).MatchString(text) {
			return true
		}
		return f.Shorthand != "" && regexp.MustCompile(`(^|[\x60\s\[(])-`+regexp.QuoteMeta(f.Shorthand)+`\b`).MatchString(text)
	}
	n := 0
	for _, c := range []*cobra.Command{
		cli.NewAnalyzeCmd(nil, io.Discard, io.Discard), cli.NewGraphCmd(nil, io.Discard, io.Discard),
		cli.NewObserveCmd(nil, io.Discard, io.Discard), cli.NewDiscoverCmd(nil, io.Discard, io.Discard),
		sourceFlags(t, "demo", "cmd/retrycap/demo.go"),
	} {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			n++
			if !named(docs, f) {
				t.Errorf("retrycap %s --%s is in no doc", c.Name(), f.Name)
			}
		})
	}
	table := strings.Join(section(t, readMarkdown(t, "docs/storm-lab.md"), "Flags"), "\n")
	sourceFlags(t, "storm", "cmd/retrycap/storm.go").Flags().VisitAll(func(f *pflag.Flag) {
		n++
		if !named(table, f) {
			t.Errorf("docs/storm-lab.md, Flags: retrycap storm --%s is not listed", f.Name)
		}
	})
	if n < 60 {
		t.Fatalf("%d flags checked: the commands' flags were not read", n)
	}
}
