package proxy

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// engineUsers: the top-level tests (and benchmarks) that asked for the
// engine in this run, through testEngineFor.
var engineUsers sync.Map

// testEngineFor is how a test reads the -engine flag: it records t's
// top-level test, which EngineRun checks against the static list the
// -engine=goroutine run is limited to.
func testEngineFor(t testing.TB) string {
	engineUsers.Store(strings.SplitN(t.Name(), "/", 2)[0], true)
	return *testEngine
}

// EngineFlag is testEngineFor for the package's external tests (package
// proxy_test), which cannot reach the flag's variable.
func EngineFlag(t testing.TB) string { return testEngineFor(t) }

// engineTests: the tests whose outcome depends on -engine, the ones
// that mention (through the test files' functions) the flag's variable.
func engineTests() ([]string, error) {
	return proxytest.EngineTests(".", "testEngine")
}

// EngineRun runs the package's tests (from TestMain, in package
// proxy_test; a function, not a Run method, so that every t.Run does not
// lead EngineTests to the flag). With -engine other than the default and no -run, it runs
// only engineTests: the rest would repeat the default run exactly (flag
// parsing, subprocesses on the binary's default engine, tests that name
// both engines themselves). After any run that passed, it fails if a test
// read the flag (testEngineFor) without being in engineTests, i.e. if the
// -engine=goroutine run would leave it out: the default run of `make test`
// runs every test, so a test the static analysis misses fails there.
func EngineRun(m *testing.M) int {
	flag.Parse()
	run := flag.Lookup("test.run").Value
	filtered := run.String() != ""
	if !filtered && *testEngine != "loop" {
		names, err := engineTests()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("-engine=%s: the %d tests that read the engine flag (the others ran on the default run and do not depend on it): %s\n",
			*testEngine, len(names), strings.Join(names, " "))
		if err := run.Set("^(" + strings.Join(names, "|") + ")$"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	code := m.Run()
	if code != 0 {
		return code
	}
	names, err := engineTests()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var missing []string
	engineUsers.Range(func(k, _ any) bool {
		if n := k.(string); !strings.HasPrefix(n, "Benchmark") && !slices.Contains(names, n) {
			missing = append(missing, n)
		}
		return true
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		fmt.Fprintf(os.Stderr, "FAIL: %s read the -engine flag but proxytest.EngineTests does not find it in their code: the -engine=goroutine run would leave them out\n",
			strings.Join(missing, ", "))
		return 1
	}
	return 0
}
