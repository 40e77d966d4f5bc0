package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retrycap/retrycap/internal/cli"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// decls are the names a package declares: its top-level identifiers and, as "Type.Name", its
// types' methods, struct fields (embedded ones by their type's name) and interface methods.
type decls struct {
	name  string // the package clause's name
	dir   string // from the root
	doc   string // the package comment, every file's
	names map[string]bool
}

// readDecls parses the non-test Go files of every package go list names (build tags ignored:
// a file for another OS declares names a doc may cite too).
func readDecls(t *testing.T) map[string]*decls {
	t.Helper()
	if declsRead != nil {
		return declsRead
	}
	out := map[string]*decls{}
	for path := range goList(t) {
		files, err := filepath.Glob(filepath.Join(root, path, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", path, err)
		}
		d := &decls{dir: path, names: map[string]bool{}}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			d.name = f.Name.Name
			if f.Doc != nil {
				d.doc += f.Doc.Text()
			}
			addDecls(d.names, f)
		}
		out[path] = d
	}
	declsRead = out
	return out
}

// declsRead is readDecls' answer, read once for the tests that need it (they do not change it).
var declsRead map[string]*decls

func addDecls(names map[string]bool, f *ast.File) {
	typeName := func(e ast.Expr) string {
		for {
			switch x := e.(type) {
			case *ast.StarExpr:
				e = x.X
			case *ast.IndexExpr:
				e = x.X
			case *ast.IndexListExpr:
				e = x.X
			case *ast.SelectorExpr:
				return x.Sel.Name
			case *ast.Ident:
				return x.Name
			default:
				return ""
			}
		}
	}
	for _, decl := range f.Decls {
		switch x := decl.(type) {
		case *ast.FuncDecl:
			if x.Recv != nil && len(x.Recv.List) == 1 {
				names[typeName(x.Recv.List[0].Type)+"."+x.Name.Name] = true
			} else {
				names[x.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range x.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					var fields *ast.FieldList
					switch tt := s.Type.(type) {
					case *ast.StructType:
						fields = tt.Fields
					case *ast.InterfaceType:
						fields = tt.Methods
					}
					if fields == nil {
						continue
					}
					for _, fl := range fields.List {
						for _, n := range fl.Names {
							names[s.Name.Name+"."+n.Name] = true
						}
						if len(fl.Names) == 0 {
							names[s.Name.Name+"."+typeName(fl.Type)] = true
						}
					}
				}
			}
		}
	}
}

var (
	docGoFile  = regexp.MustCompile(`(?:^|[\s(,])([A-Za-z0-9_*./-]*[A-Za-z0-9_*]\.go)\b`)
	docRepoRef = regexp.MustCompile(`(?:^|[\s(,])((?:internal|cmd|hack|test|docs|api/v1alpha1)/[A-Za-z0-9_./*-]*[A-Za-z0-9_*])`)
	docQualID  = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?`)
)

// elsewhere are the .go files package docs name that are not retrycap's.
var elsewhere = map[string]bool{
	"cluster_controller_status.go": true, // Cluster API's, the status package's model
}

// TestPackageDocsNameWhatExists: what a package's doc comment (doc.go, or the command's main.go)
// names exists: every Go file (in the package's directory, or as a path from the root), every
// path under internal/, cmd/, hack/, test/ and docs/ (config/ and charts/ are also other
// projects' paths, which docs cite), every pkg.Name of a retrycap package and every Type.Name of the
// package's own types (methods and fields): a file, function, method or field renamed or
// removed fails here until the comments that name it follow.
func TestPackageDocsNameWhatExists(t *testing.T) {
	pkgs := readDecls(t)
	byName := packagesByName(pkgs)
	exists := func(rel string) bool {
		matches, err := filepath.Glob(filepath.Join(root, rel))
		return err == nil && len(matches) > 0
	}
	checked := 0
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range pkgs {
			if !yield(p) {
				return
			}
		}
	}) {
		d := pkgs[path]
		if d.doc == "" {
			t.Errorf("%s: no package comment", path)
			continue
		}
		for _, m := range docGoFile.FindAllStringSubmatch(d.doc, -1) {
			name := m[1]
			if strings.HasPrefix(name, "_") || strings.HasPrefix(name, "*_") || elsewhere[name] {
				continue // "_test.go files": a kind of file, not one
			}
			checked++
			if !exists(filepath.Join(d.dir, name)) && !exists(name) {
				t.Errorf("%s's package comment names %s, which is neither in %s nor a path from the root", path, name, d.dir)
			}
		}
		for _, m := range docRepoRef.FindAllStringSubmatch(d.doc, -1) {
			ref := strings.TrimSuffix(strings.TrimRight(m[1], "."), "'s")
			checked++
			if !exists(ref) {
				t.Errorf("%s's package comment names %s, which does not exist", path, ref)
			}
		}
		checked += checkQualified(t, path+"'s package comment", d.doc, d, byName)
	}
	if checked < 150 {
		t.Fatalf("%d names checked in the package comments: the comments were not read", checked)
	}
}

// packagesByName are the module's packages by their names (commands left out).
func packagesByName(pkgs map[string]*decls) map[string][]*decls {
	byName := map[string][]*decls{}
	for _, d := range pkgs {
		if d.name != "main" {
			byName[d.name] = append(byName[d.name], d)
		}
	}
	return byName
}

// checkQualified checks every X.Y[.Z] of text: Type.Name of home's types (home nil: none), and
// pkg.Name[.Name] of a retrycap package. It returns how many it checked.
func checkQualified(t *testing.T, where, text string, home *decls, byName map[string][]*decls) int {
	t.Helper()
	checked := 0
	for _, m := range docQualID.FindAllStringSubmatch(text, -1) {
		x, y, z := m[1], m[2], m[3]
		switch {
		case y == "go": // a file, checked apart
		case home != nil && home.names[x] && x != home.name: // Type.Name of this package
			checked++
			if !home.names[x+"."+y] {
				t.Errorf("%s names %s.%s: %s has no method or field %s", where, x, y, x, y)
			}
		case len(byName[x]) > 0 && ast.IsExported(y): // pkg.Name[.Name] of a retrycap package
			checked++
			if !slices.ContainsFunc(byName[x], func(p *decls) bool {
				return p.names[y] && (z == "" || !isType(p, y) || p.names[y+"."+z])
			}) {
				t.Errorf("%s names %s: no package %s declares it", where, strings.TrimSuffix(x+"."+y+"."+z, "."), x)
			}
		}
	}
	return checked
}

// TestArchitectureNamesExist: every `pkg.Name` in a code span of docs/architecture.md and
// docs/development.md (`workload.ForRetryPolicy`, `gate.Enforce`, `kubeobj.FeedIndex`, ...)
// and in architecture.md's picture is declared by that retrycap package.
func TestArchitectureNamesExist(t *testing.T) {
	byName := packagesByName(readDecls(t))
	checked := 0
	for _, rel := range []string{"docs/architecture.md", "docs/development.md"} {
		md := readMarkdown(t, rel)
		for i, line := range md.lines {
			if md.code[i] {
				if rel == "docs/architecture.md" { // the picture
					checked += checkQualified(t, fmt.Sprintf("%s:%d", rel, i+1), line, nil, byName)
				}
				continue
			}
			for _, span := range codeSpan.FindAllString(line, -1) {
				checked += checkQualified(t, fmt.Sprintf("%s:%d", rel, i+1), span, nil, byName)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("%d names checked in the architecture pages: the code spans were not read", checked)
	}
}

// isType reports whether name is a type of p with methods or fields: pkg.Type.Name must be one
// of them.
func isType(p *decls, name string) bool {
	prefix := name + "."
	for n := range p.names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

var webhookName = regexp.MustCompile(`\b([a-z][a-z-]*\.retrycap\.dev)\b`)

// TestArchitectureWebhooks: docs/architecture.md's picture names every admission webhook there is
// (config/webhook/manifests.yaml's and the mesh gate's, which the manager configures itself) and
// no other, and the pages that count them ("five admission webhooks") count them right.
func TestArchitectureWebhooks(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "config/webhook/manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "- name: "); ok {
			want = append(want, strings.TrimSpace(name))
		}
	}
	src, err := os.ReadFile(filepath.Join(root, "internal/webhook/mesh_handler.go"))
	if err != nil {
		t.Fatal(err)
	}
	mesh := regexp.MustCompile(`MeshWebhookName\s*=\s*"([^"]+)"`).FindSubmatch(src)
	if len(want) < 4 || mesh == nil {
		t.Fatalf("config/webhook/manifests.yaml: %d webhooks, MeshWebhookName found: %v: nothing to compare with", len(want), mesh != nil)
	}
	want = append(want, string(mesh[1]))
	slices.Sort(want)

	md := readMarkdown(t, "docs/architecture.md")
	var got []string
	for i, line := range md.lines {
		if !md.code[i] {
			continue
		}
		for _, m := range webhookName.FindAllStringSubmatch(line, -1) {
			if !slices.Contains(got, m[1]) {
				got = append(got, m[1])
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("docs/architecture.md's picture names the webhooks %s; there are %s", show(got), show(want))
	}

	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	if len(want) >= len(words) {
		t.Fatalf("%d webhooks: count them in figures here", len(want))
	}
	count := regexp.MustCompile(`\b(` + strings.Join(words, "|") + `) (?:thin )?admission (?:webhooks|handlers)\b`)
	for _, rel := range []string{"docs/architecture.md", "docs/development.md", "internal/webhook/doc.go", "README.md"} {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(data)), " ") // a count may wrap
		text = strings.ReplaceAll(text, " // ", " ")
		for _, m := range count.FindAllStringSubmatch(text, -1) {
			if n := slices.Index(words, m[1]); n != len(want) {
				t.Errorf("%s says %q; there are %d", rel, m[0], len(want))
			}
		}
	}
}

// TestDevelopmentNamesEveryHackTool: the `hack/` row of docs/development.md's layout names every
// script, tool and module under hack/ (as a code span) and nothing that is not there. Before, it
// named five of the 25 (the node's scripts, soak, managerscale, the CoreDNS and image modules
// were in no list).
func TestDevelopmentNamesEveryHackTool(t *testing.T) {
	var row string
	for _, line := range section(t, readMarkdown(t, "docs/development.md"), "Layout") {
		if strings.HasPrefix(line, "| `hack/` |") {
			row = strings.TrimPrefix(line, "| `hack/` |")
		}
	}
	if row == "" {
		t.Fatal("docs/development.md, Layout: no `hack/` row")
	}
	named := map[string]bool{}
	for _, span := range codeSpan.FindAllString(row, -1) {
		name := strings.Trim(span, "`")
		named[name] = true
		if _, err := os.Stat(filepath.Join(root, "hack", name)); err != nil {
			t.Errorf("docs/development.md, Layout, hack/: names `%s`, which hack/ does not have", name)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, "hack"))
	if err != nil || len(entries) < 10 {
		t.Fatalf("hack/: %d entries, %v", len(entries), err)
	}
	for _, e := range entries {
		if !named[e.Name()] {
			t.Errorf("docs/development.md, Layout, hack/: hack/%s is not named", e.Name())
		}
	}
}

// TestDevelopmentPureLinksNoClient: a package docs/development.md's layout calls pure links no
// Kubernetes client (neither client-go nor controller-runtime, directly or not), as the
// architecture page's *pure* marks are checked.
func TestDevelopmentPureLinksNoClient(t *testing.T) {
	pkgs := goList(t)
	n := 0
	for _, line := range section(t, readMarkdown(t, "docs/development.md"), "Packages") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) != 2 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "pure") {
			continue
		}
		for _, m := range namedPath.FindAllStringSubmatch(cells[0], -1) {
			n++
			if pkgs[m[1]].client {
				t.Errorf("docs/development.md, Packages: %s is called pure but links a Kubernetes client (client-go or controller-runtime)", m[1])
			}
		}
	}
	if n < 10 {
		t.Fatalf("docs/development.md, Packages: %d pure packages read: the table's shape changed, nothing was checked", n)
	}
}

var docFlag = regexp.MustCompile(`(?:^|[^\w-])--([a-z][a-z0-9-]*)`)

// TestPackageDocsFlagsExist: every --flag a package comment names is a flag of one of
// retrycap's binaries (the manager, the proxy, the CLI's commands, the lab app) or one of the
// two kubectl flags observe's doc cites, so a flag
// renamed or removed fails here until the comments that name it follow.
func TestPackageDocsFlagsExist(t *testing.T) {
	flags := map[string]bool{"help": true,
		"timestamps": true, "prefix": true, // kubectl logs's, whose output observe reads
	}
	add := func(fs *pflag.FlagSet) { fs.VisitAll(func(f *pflag.Flag) { flags[f.Name] = true }) }
	add(sidecar.NewFlagSet(&sidecar.Args{}, io.Discard))
	for _, c := range []*cobra.Command{
		sourceFlags(t, "manager", "cmd/manager/main.go"), sourceFlags(t, "lab-app", "cmd/lab-app/main.go"),
		sourceFlags(t, "storm", "cmd/retrycap/storm.go"), sourceFlags(t, "demo", "cmd/retrycap/demo.go"),
		cli.NewAnalyzeCmd(nil, io.Discard, io.Discard), cli.NewGraphCmd(nil, io.Discard, io.Discard),
		cli.NewObserveCmd(nil, io.Discard, io.Discard), cli.NewDiscoverCmd(nil, io.Discard, io.Discard),
	} {
		add(c.Flags())
	}
	n := 0
	for path, d := range readDecls(t) {
		for _, m := range docFlag.FindAllStringSubmatch(d.doc, -1) {
			n++
			if !flags[m[1]] {
				t.Errorf("%s's package comment names --%s, which no retrycap binary has", path, m[1])
			}
		}
	}
	if n < 15 {
		t.Fatalf("%d flags found in the package comments: the comments were not read", n)
	}
}
