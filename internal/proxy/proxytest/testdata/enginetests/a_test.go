package p

import (
	"flag"
	"testing"
)

var engine = flag.String("engine", "loop", "")

func start(t testing.TB) string { return *engine }

type fixture struct{}

func (fixture) up(t *testing.T) { start(t) }

var table = []func(testing.TB) string{start}

func TestDirect(t *testing.T)    { start(t) }
func TestViaMethod(t *testing.T) { fixture{}.up(t) }
func TestViaVar(t *testing.T)    { table[0](t) }
func TestViaClosure(t *testing.T) {
	t.Run("sub", func(t *testing.T) { start(t) })
}
func TestNone(t *testing.T)        { _ = flag.Lookup("other") }
func Testlower(t *testing.T)       { start(t) } // not a test: go test does not run it
func FuzzDirect(f *testing.F)      { start(f) }
func ExampleNone()                 {}
func BenchmarkDirect(b *testing.B) { start(b) }

// Exported is for p_test.
func Exported(t *testing.T) { start(t) }
func TestMain(m *testing.M) { start(nil) }
