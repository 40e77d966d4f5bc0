package analyze

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestJSONDocumentAsYAMLPath: a document written as JSON converts to the same JSON through
// jsonDocument as through the YAML path (yamlToJSON, strict), for every document of the
// repository's testdata written as JSON (compact and indented) and for the numbers and keys
// where the two parsers could differ; what jsonDocument does not take (a key twice, text after
// the value, YAML) it leaves to the YAML path.
func TestJSONDocumentAsYAMLPath(t *testing.T) {
	cases := []string{
		`{"a": 1.0, "b": 1e3, "c": -0, "d": 12345678901234567890, "e": 0.1, "f": -7, "g": 1.5e-3}`,
		`{"\u0061b": "x", "z": {"y": [1, {"x": null}], "w": true}, "": ""}`,
		`{"html": "<a href=\"x\">&</a>", "uni": "é\u00e9"}`,
		`[{"a": 1}, {"a": 2}]`,
		"  \n{\"a\": [],\n \"b\": {}}\n",
	}
	files, _ := filepath.Glob("../*/testdata/*.yaml")
	more, _ := filepath.Glob("../*/testdata/*/*.yaml")
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range splitDocuments(data) {
			js, err := yamlToJSON(d.raw, true)
			if err != nil || len(js) < 2 || js[0] != '{' {
				continue
			}
			var ind bytes.Buffer
			if json.Indent(&ind, js, "", "  ") != nil {
				continue
			}
			cases = append(cases, string(js), ind.String())
		}
	}
	if len(cases) < 200 {
		t.Fatalf("%d cases: the testdata globs found too few", len(cases))
	}
	for _, c := range cases {
		want, err := yamlToJSON([]byte(c), true)
		if err != nil {
			t.Fatalf("%q: the YAML path: %v", c, err)
		}
		got, ok := jsonDocument([]byte(c))
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("%q:\njsonDocument %v %s\nyamlToJSON      %s", c, ok, got, want)
		}
	}
	for _, c := range []string{
		`{"a": 1, "a": 2}`,
		`{"x": {"a": 1, "b": {"a": 3}, "a": 2}}`,
		`{"\u0061": 1, "a": 2}`,
		`{"a": 1} trailing`,
		`{"a": 1}{"b": 2}`,
		"a: 1\n",
		`{"a": 1e400}`,
		`{a: 1}`,
	} {
		if _, ok := jsonDocument([]byte(c)); ok {
			t.Errorf("%q: taken by jsonDocument, want it left to the YAML path", c)
		}
	}
	// A character outside the BMP escaped as JSON writes it (a surrogate pair: jq and Python's
	// json.dumps write them so) is read as JSON reads it, as kubectl reads a JSON file; the YAML
	// path refused the document ("found invalid Unicode character escape code").
	if got, ok := jsonDocument([]byte(`{"emoji": "\ud83d\ude00"}`)); !ok || string(got) != `{"emoji":"😀"}` {
		t.Errorf("a surrogate pair: %v %s, want {\"emoji\":\"😀\"}", ok, got)
	}
	// An object of many keys (past the linear scan) with one twice.
	var b strings.Builder
	b.WriteString(`{"k": 0`)
	for i := 1; i <= 100; i++ {
		b.WriteString(`, "k` + strings.Repeat("x", i) + `": 1`)
	}
	if _, ok := jsonDocument([]byte(b.String() + `, "kxx": 2}`)); ok {
		t.Error("a key twice among 100: taken by jsonDocument")
	}
	if _, ok := jsonDocument([]byte(b.String() + `}`)); !ok {
		t.Error("100 distinct keys: not taken by jsonDocument")
	}
}

// TestReadHugeJSONDocumentBounded: reading one VirtualService of 20,000 routes written as JSON
// (2.9 MB) allocates at most 40 times its size (37.6x; 106.7x before: the YAML parser read it
// twice, once to convert it and once to look for text after it; a JSON document now takes one
// pass of encoding/json and a walk of its bytes for keys given twice), and reads its routes.
func TestReadHugeJSONDocumentBounded(t *testing.T) {
	js, err := yamlToJSON([]byte(hugeVirtualService(20000)), true)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := NewManifests()
	errs := Reader{}.Read(m, "huge-vs.json", bytes.NewReader(js))
	runtime.ReadMemStats(&after)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if got, want := kindCounts(m.Summary.Mesh), "VirtualService 1"; got != want {
		t.Fatalf("mesh objects %q, want %q", got, want)
	}
	size := uint64(len(js))
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("input %d bytes, allocated %d bytes (%.1fx)", size, alloc, float64(alloc)/float64(size))
	if alloc > 40*size {
		t.Fatalf("allocated %d bytes reading %d bytes of JSON: %.1fx, over the bound of 40x", alloc, size, float64(alloc)/float64(size))
	}
}
