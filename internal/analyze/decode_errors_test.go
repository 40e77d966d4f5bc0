package analyze

import (
	"fmt"
	"strings"
	"testing"
)

// TestDecodeErrorsNameTheObject: every error of a document that is read badly names the file,
// the document, the object whenever its apiVersion, kind and name can still be read (before, a
// key written twice and a YAML syntax error named none of them), and the field when known.
func TestDecodeErrorsNameTheObject(t *testing.T) {
	const head = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: reviews\n  namespace: shop\nspec:\n  hosts: [reviews]\n"
	route := func(retries string) string {
		return head + "  http:\n  - " + retries + "\n    route:\n    - destination: {host: reviews}\n"
	}
	const dupAdvice = "kubectl apply would keep the later without a word): write it once"
	for _, c := range []struct {
		name, file, in string
		want           []string
		object, field  string // ErrorEntries of the first error
	}{
		{"a key written twice (before: yaml: unmarshal errors: line 11: key \"retries\" already set in map)", "vs.yaml",
			head + "  http:\n  - retries:\n      attempts: 3\n    retries:\n      attempts: 4\n",
			[]string{`vs.yaml: document 1: VirtualService shop/reviews: duplicate field "spec.http[0].retries" (lines 9 and 11; ` + dupAdvice},
			"VirtualService shop/reviews", "spec.http[0].retries"},
		{"two keys written twice, an annotation's key quoted", "vs.yaml",
			strings.Replace(head, "  namespace: shop\n", "  namespace: shop\n  annotations:\n    retrycap.dev/upstreams: a\n    retrycap.dev/upstreams: b\n", 1) + "  hosts: [x]\n",
			[]string{`vs.yaml: document 1: VirtualService shop/reviews: duplicate field "metadata.annotations[\"retrycap.dev/upstreams\"]" (lines 7 and 8; ` + dupAdvice +
				`; duplicate field "spec.hosts" (lines 10 and 11; ` + dupAdvice},
			"VirtualService shop/reviews", `metadata.annotations["retrycap.dev/upstreams"]`},
		{"in the second document, after blank lines: the file's lines", "two.yaml",
			"apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: shop}\n---\n\n\n" + head + "  hosts: [y]\n",
			[]string{`two.yaml: document 2: VirtualService shop/reviews: duplicate field "spec.hosts" (lines 13 and 14; ` + dupAdvice},
			"VirtualService shop/reviews", "spec.hosts"},
		{"a byte-order mark", "bom.yaml", "\ufeff" + head + "  hosts: [y]\n",
			[]string{`bom.yaml: document 1: VirtualService shop/reviews: duplicate field "spec.hosts" (lines 7 and 8; ` + dupAdvice},
			"VirtualService shop/reviews", "spec.hosts"},
		{"JSON, a key twice on one line", "vs.json",
			`{"apiVersion": "networking.istio.io/v1", "kind": "VirtualService", "metadata": {"name": "reviews"}, "spec": {"http": [{"retries": {"attempts": 3}, "retries": {"attempts": 4}}]}}`,
			[]string{`vs.json: document 1: VirtualService default/reviews: duplicate field "spec.http[0].retries" (line 1, columns 120 and 148; ` + dupAdvice},
			"VirtualService default/reviews", "spec.http[0].retries"},
		{"a tab (before: the object unnamed, the character unsaid)", "tab.yaml", head + "  http:\n\t- retries: {attempts: 3}\n",
			[]string{`tab.yaml: document 1: VirtualService shop/reviews: yaml: line 9: found character that cannot start any token (a tab at line 9, column 1: YAML indents with spaces, never tabs)`},
			"VirtualService shop/reviews", ""},
		{"a tab in metadata: the object read from its lines", "tab.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: 'web' # the shop\n  namespace: \"shop\"\n\tlabels: {}\n",
			[]string{`tab.yaml: document 1: Deployment shop/web: yaml: line 6: found character that cannot start any token (a tab at line 6, column 1: YAML indents with spaces, never tabs)`},
			"Deployment shop/web", ""},
		{"a syntax error with no name to read", "x.yaml", "kind: Deployment\nspec: [\n",
			[]string{`x.yaml: document 1: yaml: line 2: did not find expected node content`}, "", ""},
		{"a value of the wrong type", "vs.yaml", route(`retries: {attempts: "three"}`),
			[]string{`vs.yaml: document 1: VirtualService shop/reviews spec.http[0].retries.attempts: "three" is a string, want an integer`},
			"VirtualService shop/reviews", "spec.http[0].retries.attempts"},
		{"a list where an object is expected", "vs.yaml", route(`retries: [{attempts: 3}]`),
			[]string{`vs.yaml: document 1: VirtualService shop/reviews spec.http[0].retries: [{"attempts":3}] is a list, want an object`},
			"VirtualService shop/reviews", "spec.http[0].retries"},
		{"JSON, a value of the wrong type", "vs.json",
			`{"apiVersion": "networking.istio.io/v1", "kind": "VirtualService", "metadata": {"name": "reviews", "namespace": "shop"}, "spec": {"http": [{"retries": {"attempts": "three"}}]}}`,
			[]string{`vs.json: document 1: VirtualService shop/reviews spec.http[0].retries.attempts: "three" is a string, want an integer`},
			"VirtualService shop/reviews", "spec.http[0].retries.attempts"},
		{"an unknown kind", "vs.yaml", strings.Replace(head, "VirtualService", "VirtualServise", 1),
			[]string{`vs.yaml: document 1: VirtualServise shop/reviews: kind "VirtualServise": networking.istio.io/v1 has no such kind (the API server refuses it: no matches for kind "VirtualServise" in version "networking.istio.io/v1"); did you mean VirtualService?`},
			"VirtualServise shop/reviews", ""},
		{"no kind (before: the object unnamed)", "vs.yaml", strings.Replace(head, "kind: VirtualService\n", "", 1),
			[]string{`vs.yaml: document 1: kind is missing (apiVersion networking.istio.io/v1, metadata.name "reviews", metadata.namespace "shop")`}, "", ""},
		{"a namespace given as a list (before: not a Kubernetes object, unnamed)", "vs.yaml", strings.Replace(head, "namespace: shop", "namespace: [shop]", 1),
			[]string{`vs.yaml: document 1: VirtualService reviews: metadata.namespace: ["shop"] is a list, want a string`},
			"VirtualService reviews", "metadata.namespace"},
		{"labels given as a list (before: json: cannot unmarshal array into Go struct field objectMeta.metadata.labels)", "vs.yaml",
			strings.Replace(head, "namespace: shop\n", "namespace: shop\n  labels: [a]\n", 1),
			[]string{`vs.yaml: document 1: VirtualService shop/reviews metadata.labels: ["a"] is a list, want an object`},
			"VirtualService shop/reviews", "metadata.labels"},
		{"JSON that does not parse (before: no line, no column)", "vs.json",
			`{"apiVersion": "networking.istio.io/v1", "kind": "VirtualService", "metadata": {"name": "reviews"}, "spec": {"http": [}` + "\n",
			[]string{`vs.json: document 1: yaml: line 1: did not find expected node content (as JSON: invalid character '}' looking for beginning of value, at line 1, column 119)`},
			"", ""},
		{"the second value of a JSON stream cut short (before: document 1, Service default/b, \"text after the object\" at line 2, column 1)", "stream.json",
			`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}}` + "\n" + `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c"}` + "\n",
			[]string{`stream.json: document 2: yaml: line 2: did not find expected ',' or '}' (as JSON: unexpected end of JSON input, at line 2, column 66)`}, "", ""},
		{"the second value of a JSON stream with a bare key, read as YAML as kubectl reads it (before: document 1, Service default/b)", "stream.json",
			`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}}` + "\n\n" + `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c", x}}` + "\n",
			[]string{`stream.json: document 2: Service default/c: unknown field "metadata.x"`}, "Service default/c", "metadata.x"},
		{"a JSON list that does not parse (before: no JSON message, no column)", "list.json",
			`[{"apiVersion": "v1", "kind": "Service"` + "\n",
			[]string{`list.json: document 1: yaml: line 1: did not find expected ',' or '}' (as JSON: unexpected end of JSON input, at line 1, column 40)`}, "", ""},
		{"a parser error: its line, not the one before (before: \"line 7\", the line of hosts)", "vs.yaml", head + " http: []\n",
			[]string{`vs.yaml: document 1: VirtualService shop/reviews: yaml: line 8: did not find expected key`}, "VirtualService shop/reviews", ""},
		{"a syntax error on a later document's first line (before: no line; from kumahq/kuma test/e2e_env/multizone/validation/testdata, a kubectl error saved as .golden.yaml)", "two.yaml",
			"apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\nError while running command: exit status 1; Error from server (Forbidden): error when creating \"STDIN\"\n",
			[]string{`two.yaml: document 2: yaml: line 5: mapping values are not allowed in this context`}, "", ""},
		{"a parser error at the end of the input: the document's last line, not the one after it", "cut.yaml",
			"apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\nkind: Deployment\nspec: [\n",
			[]string{`cut.yaml: document 2: yaml: line 6: did not find expected node content`}, "", ""},
		{"a merge key's keys overridden: no duplicate", "vs.yaml",
			"base: &b {attempts: 2, perTryTimeout: 1s}\n" + route("retries: {<<: *b, attempts: 3}"), nil, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewManifests()
			errs := Reader{}.Read(m, c.file, strings.NewReader(c.in))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("errors\n%q\nwant\n%q", got, c.want)
			}
			if len(errs) == 0 {
				return
			}
			e := ErrorEntries(errs[0])[0]
			if e.File != c.file || e.Document == 0 || e.Object != c.object || e.Field != c.field {
				t.Fatalf("entry %+v: want file %s, object %q, field %q", e, c.file, c.object, c.field)
			}
		})
	}
}
