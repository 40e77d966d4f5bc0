package proxytest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EngineTests returns, sorted, the top-level tests, fuzz targets and
// examples declared in dir's _test.go files that can reach one of the
// marker identifiers (the -engine flag's variable and the helpers that read
// it): those whose outcome depends on the engine the flag picks, which
// `make test` runs a second time with -engine=goroutine. The others (flag
// parsing, a subprocess on the binary's default engine, tests that name
// both engines themselves) would only repeat the first run.
//
// Reachability is by name, over the declarations of the test files: a test
// reaches every function, method and package-level variable of its own
// package whose name it mentions, and of the package under test (an
// external _test package's "pkg.Name"), and so on transitively. Matching by
// name rather than by type errs towards running a test on both engines
// (two methods of one name are one node), never towards leaving one out.
func EngineTests(dir string, markers ...string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, fmt.Errorf("engine tests in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("engine tests in %s: no _test.go files", dir)
	}
	fset := token.NewFileSet()
	g := &refGraph{refs: map[string]map[string]bool{}}
	var tests []string  // node keys of Test*/Fuzz*/Example* functions
	var internal string // the package under test's name
	files := map[string][]*ast.File{}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("engine tests: %w", err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("engine tests: %w", err)
		}
		files[f.Name.Name] = append(files[f.Name.Name], f)
		if !strings.HasSuffix(f.Name.Name, "_test") {
			internal = f.Name.Name
		}
	}
	// Every declaration's node first, so that references resolve whatever
	// the order of the files.
	for pkg, fs := range files {
		for _, f := range fs {
			for _, d := range f.Decls {
				for _, name := range declNames(d) {
					g.refs[pkg+"."+name] = map[string]bool{}
				}
			}
		}
	}
	for pkg, fs := range files {
		for _, f := range fs {
			for _, d := range f.Decls {
				for _, name := range declNames(d) {
					key := pkg + "." + name
					g.addRefs(key, pkg, internal, d)
					if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && isTestName(fd.Name.Name) {
						tests = append(tests, key)
					}
				}
			}
		}
	}
	for _, m := range markers {
		found := false
		for k := range g.refs {
			found = found || k[strings.LastIndex(k, ".")+1:] == m
		}
		if !found {
			return nil, fmt.Errorf("engine tests in %s: marker %q is declared in no _test.go file", dir, m)
		}
	}
	var out []string
	for _, key := range tests {
		if g.reaches(key, markers) {
			out = append(out, key[strings.LastIndex(key, ".")+1:])
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// isTestName: what go test runs (and -run selects) without -bench.
func isTestName(name string) bool {
	if name == "TestMain" {
		return false
	}
	for _, p := range []string{"Test", "Fuzz", "Example"} {
		if name == p || strings.HasPrefix(name, p) && !isLower(name[len(p):]) {
			return true
		}
	}
	return false
}

func isLower(rest string) bool { return rest != "" && rest[0] >= 'a' && rest[0] <= 'z' }

// declNames: the node names a declaration defines. A method is
// "method.Name" whatever its receiver; init functions, types and
// constants define none (nothing mentions an init, and neither types nor
// constants run code).
func declNames(d ast.Decl) []string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil {
			return []string{"method." + d.Name.Name}
		}
		if d.Name.Name == "init" {
			return nil
		}
		return []string{d.Name.Name}
	case *ast.GenDecl:
		if d.Tok != token.VAR {
			return nil
		}
		var names []string
		for _, s := range d.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				names = append(names, n.Name)
			}
		}
		return names
	}
	return nil
}

type refGraph struct {
	refs map[string]map[string]bool // node key -> the node keys it mentions
}

// addRefs records every name d mentions that is a node of pkg (a function,
// variable or method of that name) or, for "internal.Name" in an external
// test package, a node of the package under test.
func (g *refGraph) addRefs(key, pkg, internal string, d ast.Decl) {
	add := func(p, name string) {
		for _, k := range []string{p + "." + name, p + ".method." + name} {
			if _, ok := g.refs[k]; ok && k != key {
				g.refs[key][k] = true
			}
		}
	}
	ast.Inspect(d, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == internal && pkg != internal {
				add(internal, n.Sel.Name)
				return false
			}
		case *ast.Ident:
			add(pkg, n.Name)
		}
		return true
	})
}

// reaches: whether key mentions, directly or through the nodes it
// mentions, a node named after one of the markers (in either package).
func (g *refGraph) reaches(key string, markers []string) bool {
	seen := map[string]bool{}
	stack := []string{key}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[k] {
			continue
		}
		seen[k] = true
		if slices.Contains(markers, k[strings.LastIndex(k, ".")+1:]) && k != key {
			return true
		}
		for r := range g.refs[k] {
			stack = append(stack, r)
		}
	}
	return false
}
