package analyze

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestYAMLToJSONAsTheLibrary: yamlToJSON gives sigs.k8s.io/yaml's JSON and errors, byte for
// byte, for every document of the repository's manifests and test data and for the YAML corners
// (keys that are numbers, booleans, floats; merge keys; HTML characters; special floats;
// timestamps; binary; a key written twice).
func TestYAMLToJSONAsTheLibrary(t *testing.T) {
	docs := []string{
		"a: 1\n1: a\ntrue: b\n1.5: c\nnull: d\n",
		"x: <b>&amp;</b>\ny: \"\\u2028\"\n",
		"f: [.inf, -.inf, 1e3, 0.1, 1.0, 3.14159265358979, 1e300]\n",
		"n: .nan\n",
		".inf: a\n",
		"t: 2001-12-14T21:59:43.10-05:00\nd: 2002-12-14\n",
		"b: !!binary aGVsbG8=\n",
		"base: &b {a: 1, b: 2}\nm: {<<: *b, a: 3}\n",
		"a: 1\na: 2\n",
		"o: 0777\nh: 0x1F\nbig: 18446744073709551615\nneg: -9223372036854775808\nyes: yes\noff: off\n",
		"[1, {a: b}, null, ~, '']\n",
		"plain\n",
		"{a: [b, {c: d}]}: 1\n",
		"a:\n\t- b\n",
		"",
		"# only a comment\n",
	}
	for _, dir := range []string{"testdata", "../cli/testdata", "../../config", "../../docs", "../../test"} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !hasManifestExt(p) {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, doc := range splitDocuments(data) {
				docs = append(docs, string(doc.raw))
			}
			return nil
		})
	}
	if len(docs) < 200 {
		t.Fatalf("only %d documents found", len(docs))
	}
	for _, strict := range []bool{true, false} {
		for i, doc := range docs {
			want, wantErr := yaml.YAMLToJSON([]byte(doc))
			if strict {
				want, wantErr = yaml.YAMLToJSONStrict([]byte(doc))
			}
			got, err := yamlToJSON([]byte(doc), strict)
			if string(got) != string(want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("strict %v, document %d %.200q:\n got %.300s, %v\nwant %.300s, %v", strict, i, doc, got, err, want, wantErr)
			}
		}
	}
	t.Logf("%d documents", len(docs))
}
