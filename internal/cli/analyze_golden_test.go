package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/analyze/kustomize"
	"github.com/retrycap/retrycap/internal/publicdatatest"
)

// The tests build kustomizations in process, as the full CLI does.
func init() { Kustomize = kustomize.Build }

var update = flag.Bool("update", false, "rewrite testdata/cases/*.golden from the current output")

// Every testdata/cases/NAME.args (one argument a line, after "analyze") is run and its exit code,
// stdout and stderr compared exactly with NAME.golden; -update rewrites the goldens. An argument
// naming a directory with a publicdatatest.ListFile (testdata/public) is that directory assembled
// with its public projects' files from their Go modules, and named in the output as written.
func TestAnalyzeGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/cases/*.args")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, c := range cases {
		name := strings.TrimSuffix(filepath.Base(c), ".args")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Fields(string(raw))
			runArgs, assembled := withModuleFiles(t, args)
			code, stdout, stderr := run(t, "", append([]string{"analyze"}, runArgs...)...)
			got := fmt.Sprintf("$ retrycap analyze %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
			for tmp, arg := range assembled {
				got = strings.ReplaceAll(got, tmp, arg)
			}
			if wd, err := os.Getwd(); err == nil {
				got = strings.ReplaceAll(got, wd, "$PWD") // kustomize's errors name absolute paths
			}
			golden := strings.TrimSuffix(c, ".args") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}

// withModuleFiles is args with each directory that lists module files (publicdatatest.ListFile)
// replaced by its assembled copy, and the copies' paths to the arguments they stand for.
func withModuleFiles(t *testing.T, args []string) ([]string, map[string]string) {
	t.Helper()
	out := slices.Clone(args)
	assembled := map[string]string{}
	for i, a := range args {
		if _, ok, err := publicdatatest.ReadList(a); err != nil {
			t.Fatal(err)
		} else if ok {
			out[i] = publicdatatest.Dir(t, a)
			assembled[out[i]] = a
		}
	}
	return out, assembled
}
