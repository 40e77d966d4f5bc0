package analyze

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// FuzzReadManifests feeds the manifest reader arbitrary files (seeded with testdata's manifests
// and the shapes it reads: multi-document YAML, JSON streams and arrays, Lists, merge keys, a
// BOM): never a panic, bounded time, every error names the file and its document, and each
// document alone is read (an object, a List's items), skipped with a warning, or refused with an
// error: never dropped without a word. Where sigs.k8s.io/yaml and apimachinery's unstructured
// decoding read a document as objects and the reader reads it without error, both count the same
// objects. go test runs the seeds and testdata/fuzz; go test -run '^$' -fuzz
// '^FuzzReadManifests$' ./internal/analyze fuzzes.
func FuzzReadManifests(f *testing.F) {
	files, _ := filepath.Glob("testdata/mesh/*.yaml")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: shop}\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n",
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}}` + "\n" + `{"apiVersion":"v1","kind":"Service","metadata":{"name":"b"}}`,
		`[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}}]`,
		"base: &b {apiVersion: v1, kind: ConfigMap}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\n",
		"x: &a {apiVersion: v1}\napiVersion: v1\nkind: ConfigMap\n<<: *a\nmetadata: {name: m}\n",
		"\ufeffapiVersion: v1\nkind: ServiceList\nitems: null\n",
		"~\n---\n--- # c\n...\n---\n[]\n---\n\"x\"\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n",
		"apiVersion: v1\nkind: List\nitems: [{kind: List, apiVersion: v1, items: [{kind: Service, apiVersion: v1, metadata: {name: s}}]}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		r := Reader{DefaultNamespace: "default"}
		start := time.Now()
		m := NewManifests()
		for _, err := range r.Read(m, "fuzz.yaml", bytes.NewReader(data)) {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Source.File != "fuzz.yaml" || !strings.HasPrefix(err.Error(), "fuzz.yaml: document ") {
				t.Fatalf("%q: an error that names no document: %v", data, err)
			}
		}
		_ = m.Analyze()
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%q: read in %v", data, d)
		}
		// Each document alone.
		for _, whole := range splitDocuments(data) {
			for _, d := range jsonStream(whole) {
				if isEmpty(d.raw) {
					continue
				}
				one := NewManifests()
				errs := r.Read(one, "doc.yaml", bytes.NewReader(d.raw))
				said := len(errs) > 0 || one.Summary.Objects > 0 || one.Summary.Skipped > 0 || len(one.Warnings) > 0
				js, jerr := yaml.YAMLToJSON(d.raw)
				if !said && jerr == nil && !emptyDoc(js) {
					t.Fatalf("%q: document %q read to nothing, without an error or a warning (%s)", data, d.raw, js)
				}
				if len(errs) > 0 || jerr != nil {
					continue
				}
				if n, ok := apimachineryObjects(js); ok && !nullItems(js) && n != one.Summary.Objects {
					t.Fatalf("%q: document %q: %d objects read, apimachinery reads %d", data, d.raw, one.Summary.Objects, n)
				}
			}
		}
	})
}

// emptyDoc reports whether a document's JSON holds nothing to read: null, or a List of no items.
func emptyDoc(js []byte) bool {
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return true
	}
	if nullItems(js) {
		return true // a List of items: null, read as kubectl reads it, empty
	}
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(js) != nil || !u.IsList() {
		return false
	}
	l, err := u.ToList()
	return err == nil && len(l.Items) == 0
}

// apimachineryObjects is how many objects apimachinery's unstructured decoding reads from a
// document's JSON (a List's items, recursively); ok false when it reads none (refused).
func apimachineryObjects(js []byte) (int, bool) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return 0, false
	}
	if !u.IsList() {
		return 1, true
	}
	l, err := u.ToList()
	if err != nil {
		return 0, false
	}
	n := 0
	for _, it := range l.Items {
		b, err := it.MarshalJSON()
		if err != nil {
			return 0, false
		}
		k, ok := apimachineryObjects(b)
		if !ok {
			return 0, false
		}
		n += k
	}
	return n, true
}
