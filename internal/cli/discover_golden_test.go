package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every testdata/discover/cases/NAME.args (one argument a line, after "discover") is run and
// its exit code, stdout and stderr compared exactly with NAME.golden; -update rewrites them. A
// directory listing module files (testdata/public) is assembled first, as TestAnalyzeGolden does.
func TestDiscoverGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/discover/cases/*.args")
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
			runArgs, assembled := withModuleFiles(t, args) // testdata/public, as analyze's goldens
			code, stdout, stderr := run(t, "", append([]string{"discover"}, runArgs...)...)
			got := fmt.Sprintf("$ retrycap discover %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
			for tmp, arg := range assembled {
				got = strings.ReplaceAll(got, tmp, arg)
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
