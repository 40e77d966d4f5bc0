package proxytest

import (
	"slices"
	"testing"
)

func TestEngineTests(t *testing.T) {
	got, err := EngineTests("testdata/enginetests", "engine")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"FuzzDirect", "TestDirect", "TestExternalViaPkg", "TestViaClosure", "TestViaMethod", "TestViaVar"}
	if !slices.Equal(got, want) {
		t.Errorf("EngineTests = %q, want %q", got, want)
	}
}

func TestEngineTestsErrors(t *testing.T) {
	for _, c := range []struct{ dir, marker, want string }{
		{"testdata/enginetests", "nosuch", `engine tests in testdata/enginetests: marker "nosuch" is declared in no _test.go file`},
		{"testdata", "engine", "engine tests in testdata: no _test.go files"},
	} {
		_, err := EngineTests(c.dir, c.marker)
		if err == nil || err.Error() != c.want {
			t.Errorf("EngineTests(%q, %q) error = %v, want %q", c.dir, c.marker, err, c.want)
		}
	}
}
