package analyze

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Hostile and unusual manifests: each is read to an exact error (file, document, object, field,
// value) or to exactly the objects the API server would store; none is read silently otherwise.
func TestReadHostile(t *testing.T) {
	const policy = "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec: {maxAmplification: 4}\n---\n"
	deploy := func(meta, tmpl string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {" + meta + "}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n" + tmpl +
			"    spec: {containers: [{name: app, image: x}]}\n"
	}
	web := deploy("name: web, namespace: shop", "    metadata:\n      labels: {app: web}\n      annotations: {retrycap.dev/upstreams: \"order=3\"}\n")
	cases := []struct {
		name, doc string
		errs      []string
		workloads int // read when no error is expected
	}{
		{"plain", policy + web, nil, 1},
		{"a byte-order mark, CRLF line ends", "\ufeff" + strings.ReplaceAll(policy+web, "\n", "\r\n"), nil, 1},
		{"a key twice in one mapping (the later was read silently)", policy + deploy("name: web, namespace: shop",
			"    metadata:\n      labels: {app: web}\n      annotations:\n        retrycap.dev/upstreams: \"order=2\"\n        retrycap.dev/upstreams: \"order=9\"\n"),
			[]string{`test.yaml: document 2: Deployment shop/web: duplicate field "spec.template.metadata.annotations[\"retrycap.dev/upstreams\"]" (lines 15 and 16; kubectl apply would keep the later without a word): write it once`}, 0},
		{"a YAML error's line counts in the file, not the document", policy + "\n\napiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n",
			[]string{`test.yaml: document 2: yaml: line 11: found character that cannot start any token (a tab at line 11, column 1: YAML indents with spaces, never tabs)`}, 0},
		{"annotations under spec.template (read by nobody, before: a pass)", policy + deploy("name: web, namespace: shop",
			"    metadata: {labels: {app: web}}\n    annotations: {retrycap.dev/upstreams: \"order=30\"}\n"),
			[]string{`test.yaml: document 2: Deployment shop/web: unknown field "spec.template.annotations"`}, 0},
		{"Annotations capitalised (read here, dropped by the API server)", policy + deploy("name: web, namespace: shop",
			"    metadata:\n      labels: {app: web}\n      Annotations: {retrycap.dev/upstreams: \"order=30\"}\n"),
			[]string{`test.yaml: document 2: Deployment shop/web: unknown field "spec.template.metadata.Annotations"`}, 0},
		{"a JSON field twice", policy + `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","name":"b","namespace":"shop"}}`,
			[]string{`test.yaml: document 2: Service shop/a: duplicate field "metadata.name" (line 6, columns 49 and 60; kubectl apply would keep the later without a word): write it once`}, 0},
		{"an annotation that is a number", policy + deploy("name: web, namespace: shop",
			"    metadata:\n      labels: {app: web}\n      annotations: {retrycap.dev/upstreams: 3}\n"),
			[]string{`test.yaml: document 2: Deployment shop/web: spec.template.metadata.annotations["retrycap.dev/upstreams"]: 3 is a number, want a string (quote it)`}, 0},
		{"an annotation that is a map", policy + deploy("name: web, namespace: shop",
			"    metadata:\n      labels: {app: web}\n      annotations: {retrycap.dev/upstreams: {order: 3}}\n"),
			[]string{`test.yaml: document 2: Deployment shop/web: spec.template.metadata.annotations["retrycap.dev/upstreams"]: {"order":3} is an object, want a string`}, 0},
		{"a label that YAML reads as a boolean", policy + deploy("name: web, namespace: shop",
			"    metadata:\n      labels: {app: web, canary: yes}\n"),
			[]string{`test.yaml: document 2: Deployment shop/web: spec.template.metadata.labels.canary: true is a boolean, want a string (quote it)`}, 0},
		{"two workloads without a name were one (the later won)", policy +
			deploy("generateName: web-, namespace: shop", "    metadata: {labels: {app: web}}\n") + "---\n" +
			deploy("namespace: shop", "    metadata: {labels: {app: web}}\n"),
			[]string{
				`test.yaml: document 2: Deployment: metadata.name is missing (metadata.generateName "web-" names an object only when the API server creates it, kubectl create; kubectl apply refuses it): give it a name`,
				`test.yaml: document 3: Deployment: metadata.name is missing`}, 0},
		{"a Pod a ReplicaSet owns has only a generateName: counted, not read", policy + "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: web-5f7c9d8b6-\n  namespace: shop\n  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5f7c9d8b6, uid: \"1\", controller: true}]\nspec: {containers: [{name: a, image: b}]}\n", nil, 0},
		{"a Service without a name", policy + "apiVersion: v1\nkind: Service\nmetadata: {namespace: shop}\nspec: {selector: {app: web}}\n",
			[]string{`test.yaml: document 2: Service: metadata.name is missing`}, 0},
		{"a cluster-scoped object is named without a namespace", "apiVersion: retrycap.dev/v1alpha1\nkind: ClusterRetryPolicy\nmetadata: {name: all}\nspec: {maxAmplification: \"4\"}\n",
			[]string{`test.yaml: document 1: ClusterRetryPolicy all: spec.maxAmplification: "4" is a string, want an integer`}, 0},
		{"a policy's unknown field (a typo of enforcement: the default Reject was taken)", "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec: {maxAmplification: 4, enforcment: Audit}\n",
			[]string{`test.yaml: document 1: RetryPolicy shop/p: unknown field "spec.enforcment"`}, 0},
		{"a Namespace's label of the wrong type", "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: [enabled]}}\n",
			[]string{`test.yaml: document 1: Namespace shop: metadata.labels.istio-injection: ["enabled"] is a list, want a string`}, 0},
		{"an old chart's Deployment (before: ignored, its upstreams dropped)", policy + strings.Replace(web, "apps/v1", "apps/v1beta2", 1) + "---\n" +
			strings.Replace(strings.Replace(web, "apps/v1", "extensions/v1beta1", 1), "name: web", "name: api", 1),
			[]string{`test.yaml: document 2: Deployment shop/web: apiVersion apps/v1beta2 is not read: retrycap reads Deployment apps/v1 (the version Kubernetes serves)`,
				`test.yaml: document 3: Deployment shop/api: apiVersion extensions/v1beta1 is not read: retrycap reads Deployment apps/v1 (the version Kubernetes serves)`}, 0},
		{"a policy of another version", strings.Replace(policy, "v1alpha1", "v1", 1) + web,
			[]string{`test.yaml: document 1: RetryPolicy shop/p: apiVersion retrycap.dev/v1 is not read: retrycap reads RetryPolicy retrycap.dev/v1alpha1 (the CRD's version)`}, 0},
		{"a misspelt kind of a version the graph reads (before: ignored, its upstreams dropped, a pass)", policy + strings.Replace(web, "kind: Deployment", "kind: Deploymnet", 1) + "---\n" +
			strings.Replace(web, "kind: Deployment", "kind: deployment", 1) + "---\napiVersion: v1\nkind: Servise\nmetadata: {name: web, namespace: shop}\n",
			[]string{`test.yaml: document 2: Deploymnet shop/web: kind "Deploymnet": apps/v1 has no such kind (the API server refuses it: no matches for kind "Deploymnet" in version "apps/v1"); did you mean Deployment?`,
				`test.yaml: document 3: deployment shop/web: kind "deployment": apps/v1 has no such kind (the API server refuses it: no matches for kind "deployment" in version "apps/v1"); did you mean Deployment?`,
				`test.yaml: document 4: Servise shop/web: kind "Servise": v1 has no such kind (the API server refuses it: no matches for kind "Servise" in version "v1"); did you mean Service?`}, 0},
		{"a misspelt policy kind, nothing near it named", strings.Replace(policy, "kind: RetryPolicy", "kind: Policy", 1) + web,
			[]string{`test.yaml: document 1: Policy shop/p: kind "Policy": retrycap.dev/v1alpha1 has no such kind (the API server refuses it: no matches for kind "Policy" in version "retrycap.dev/v1alpha1")`}, 0},
		{"other kinds of the versions read are counted, not refused", policy + web + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n---\napiVersion: apps/v1\nkind: ControllerRevision\nmetadata: {name: r, namespace: shop}\nrevision: 1\n---\napiVersion: example.com/v1\nkind: Deploymnet\nmetadata: {name: x}\n", nil, 1},
		{"another group's Service (Knative) is not a v1 Service", policy + web + "---\napiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n", nil, 1},
		{"a stream of JSON objects (before: only the first read)", "{\"apiVersion\":\"retrycap.dev/v1alpha1\",\"kind\":\"RetryPolicy\",\"metadata\":{\"name\":\"p\",\"namespace\":\"shop\"},\"spec\":{\"maxAmplification\":4}}\n" +
			"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\",\"namespace\":\"shop\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"b\"}]}}}}" +
			"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"api\",\"namespace\":\"shop\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"api\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"api\"}},\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"b\"}]}}}}\n", nil, 2},
		{"the third of a JSON stream, wrong: its own document and line", "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}\n\n{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}}\n{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"c\",\"namespace\":\"shop\"},\"spec\":{\"ports\":[{\"port\":\"80\"}]}}\n",
			[]string{`test.yaml: document 3: Service shop/c: spec.ports[0].port: "80" is a string, want an integer`}, 0},
		{"a List whose items are a map", "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
			[]string{`test.yaml: document 1: not a Kubernetes object: items: {"a":1} is an object, want a list`}, 0},
		{"a second document after '--- ' with content on its line (before: dropped silently)", policy + web + "--- {apiVersion: v1, kind: Service, metadata: {name: b}}\n", nil, 1},
		{"an object after a '...' end marker (before: dropped silently)", policy + web + "...\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n",
			[]string{`test.yaml: document 2: Deployment shop/web: text after the object: yaml: line 17: did not find expected <document start>`}, 0},
		{"JSON with text after it (before: the text passed over)", `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}} trailing words`,
			[]string{`test.yaml: document 1: Service default/a: text after the object: yaml: line 1: did not find expected <document start> (as JSON: invalid character 't' after top-level value, at line 1, column 68)`}, 0},
		{"billion laughs", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a: &a [x,x,x,x,x,x,x,x,x]\n  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n",
			[]string{`test.yaml: document 1: ConfigMap default/lol: yaml: its aliases (*name) expand it to more than 64 MiB: not read (an alias bomb? retrycap reads at most 64 MiB of a file or a document)`}, 0},
		{"nesting deeper than the parser takes", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n",
			[]string{`test.yaml: document 1: yaml: line 4: exceeded max depth of 10000`}, 0},
		{"a NUL byte in a value (before: no word of which byte, nor where)", policy + strings.Replace(web, "image: x", "image: \"x\x00\"", 1),
			[]string{`test.yaml: document 2: yaml: control characters are not allowed (U+0000 at line 15, column 46)`}, 0},
		{"a JSON list of objects (before: skipped as a JSON patch, its workload dropped and the check passed)", policy + `[{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}]`,
			[]string{`test.yaml: document 2: a list of 2 Kubernetes object(s) (Deployment web and 1 more), not an object: kubectl refuses it (Object 'Kind' is missing); write them as a kind: List with items, or one document each`}, 0},
		{"a JSON list of app config with a kind field, no apiVersion nor name (modelled on istio/istio prow/config/topology/ambient-multicluster.json, 86c9f01f; before: refused as a list of 2 Kubernetes objects, \"Kubernetes and 1 more\")",
			policy + web + "---\n" + `[{"kind": "Kubernetes", "clusterName": "primary", "network": "network-1"}, {"kind": "Kubernetes", "clusterName": "remote", "network": "network-2"}]`, nil, 1},
		{"a key twice in a document that is no Kubernetes object (modelled on kumahq/kuma pkg/api-server/testdata/resources/inspect/policies/_resources/dataplanes/meshtimeout_consumer_dataplanes.input.yaml, 348b6528: a universal Dataplane; before: an error naming no object)",
			policy + web + "---\ntype: Dataplane\nname: dp-4\nmesh: default\nlabels:\n  k8s.kuma.io/namespace: other\n  k8s.kuma.io/namespace: zone-1\n", nil, 1},
		{"a JSON patch is still skipped", policy + web + "---\n" + `[{"op": "replace", "path": "/spec/replicas", "value": 3}]`, nil, 1},
		{"a key set over a merge key's (YAML's merge: the mapping's own wins; before: refused as a key written twice)", policy + deploy("name: web, namespace: shop",
			"    metadata:\n      labels: {app: web}\n      annotations:\n        <<: {retrycap.dev/upstreams: \"order=2\", team: a}\n        retrycap.dev/upstreams: \"order=9\"\n"),
			nil, 1},
		{"a key written twice beside a merge key is still refused", policy + deploy("name: web, namespace: shop",
			"    metadata:\n      labels: {app: web}\n      annotations:\n        <<: {team: a}\n        retrycap.dev/upstreams: \"order=2\"\n        retrycap.dev/upstreams: \"order=9\"\n"),
			[]string{`test.yaml: document 2: Deployment shop/web: duplicate field "spec.template.metadata.annotations[\"retrycap.dev/upstreams\"]" (lines 16 and 17; kubectl apply would keep the later without a word): write it once`}, 0},
		{"a List with items: null is an empty list (before: counted as an ignored List)", policy + web + "---\napiVersion: v1\nkind: List\nitems: null\n", nil, 1},
		{"a PNG", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", []string{`test.yaml: document 1: yaml: invalid leading UTF-8 octet (byte 0x89 at line 1, column 1)`}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManifests()
			errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(tc.doc))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.errs, "\n") {
				t.Fatalf("errors\n got %q\nwant %q", got, tc.errs)
			}
			if tc.errs == nil && len(m.Workloads) != tc.workloads {
				t.Fatalf("read %d workload(s), want %d", len(m.Workloads), tc.workloads)
			}
			if strings.HasPrefix(tc.name, "a key set over a merge key's") {
				if got := m.Workloads[0].Annotations.Get("retrycap.dev/upstreams"); got != "order=9" {
					t.Fatalf("upstreams %q, want the mapping's own order=9", got)
				}
			}
			if strings.HasPrefix(tc.name, "a List with items: null") && (len(m.Summary.Ignored) != 0 || m.Summary.Objects != 2) {
				t.Fatalf("ignored %v, %d object(s); want none ignored, 2 objects", m.Summary.Ignored, m.Summary.Objects)
			}
			if strings.HasPrefix(tc.name, "a second document") {
				const want = "test.yaml: document 2: more than one YAML document in it (a '...' line, or '---' with content on its line): only the first is read, as kubectl reads only the first; put each document after a line of its own '---'"
				if len(m.Warnings) != 1 || m.Warnings[0].String() != want {
					t.Fatalf("warnings %v, want %q", m.Warnings, want)
				}
			}
		})
	}
}

// Directories with symbolic links: a link to a directory (one that loops back too) is not
// followed, as kubectl -f does not, and is named in a warning (before: passed over silently); a
// link to a file is read, the object given twice warned about; a dangling link and a missing
// path are errors naming them.
func TestReadDirSymlinks(t *testing.T) {
	dir := t.TempDir()
	const doc = "apiVersion: v1\nkind: Service\nmetadata: {name: c, namespace: shop}\n"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "app", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "app", "a.yaml"), []byte(doc), 0o644))
	must(os.Symlink("..", filepath.Join(dir, "app", "sub", "up")))
	must(os.Symlink("../app", filepath.Join(dir, "app", "self")))
	must(os.Symlink("a.yaml", filepath.Join(dir, "app", "b.yaml")))
	for _, recursive := range []bool{false, true} {
		m, errs := (Reader{Recursive: recursive}).ReadPaths([]string{filepath.Join(dir, "app")})
		if len(errs) != 0 {
			t.Fatalf("recursive %v: %v", recursive, errs)
		}
		var got []string
		for _, w := range m.Warnings {
			got = append(got, strings.TrimPrefix(w.String(), dir+"/"))
		}
		want := []string{
			"app/self: a symbolic link to a directory (../app), not read: kubectl -f does not follow one either; name it with -f to read it",
			"app/b.yaml: document 1: Service shop/c is also at " + dir + "/app/a.yaml: document 1: the later wins",
		}
		if recursive {
			want = []string{want[0], "app/sub/up: a symbolic link to a directory (..), not read: kubectl -f does not follow one either; name it with -f to read it", want[1]}
		}
		if m.Summary.Files != 2 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("recursive %v: %d file(s), warnings\n%s\nwant 2 and\n%s", recursive, m.Summary.Files, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	must(os.Symlink("gone.yaml", filepath.Join(dir, "app", "dangling.yaml")))
	for _, p := range []string{filepath.Join(dir, "app"), filepath.Join(dir, "nothing-here.yaml")} {
		_, errs := (Reader{}).ReadPaths([]string{p})
		want := "open " + filepath.Join(dir, "app", "dangling.yaml") + ": no such file or directory"
		if strings.HasSuffix(p, "nothing-here.yaml") {
			want = "-f " + p + ": no such file or directory"
		}
		if len(errs) != 1 || errs[0].Error() != want {
			t.Errorf("%s: errors %v, want %q", p, errs, want)
		}
	}
}

// An empty directory is named (before: "read: 0 file(s)" and no word on why).
func TestReadEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("apiVersion: v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, errs := (Reader{}).ReadPaths([]string{dir})
	want := dir + ": a directory with no *.yaml, *.yml or *.json file: nothing read from it"
	if len(errs) != 0 || len(m.Warnings) != 1 || m.Warnings[0].String() != want {
		t.Fatalf("errors %v, warnings %v; want %q", errs, m.Warnings, want)
	}
}

// Each value of a JSON stream is a document of its own, with the line it starts on (SARIF
// points there).
func TestJSONStreamLines(t *testing.T) {
	in := "\n{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"a\",\"namespace\":\"shop\"}}\n\n" +
		"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\n \"metadata\":{\"name\":\"b\",\"namespace\":\"shop\"}} {\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"c\",\"namespace\":\"shop\"}}\n"
	m := NewManifests()
	if errs := (Reader{}).Read(m, "s.json", strings.NewReader(in)); len(errs) != 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, n := range []string{"a", "b", "c"} {
		src := m.Sources["Service/shop/"+n]
		got = append(got, fmt.Sprintf("%s:%d:%d", n, src.Document, src.Line))
	}
	if want := "a:1:2 b:2:4 c:3:5"; strings.Join(got, " ") != want {
		t.Fatalf("got %s, want %s", strings.Join(got, " "), want)
	}
}

// TestServedKindsCoverReaders: every kind the graph reads is a kind servedKinds knows, so that
// unknownKind judges every version the graph reads from and refuses none of its kinds.
func TestServedKindsCoverReaders(t *testing.T) {
	versions := map[string]bool{}
	for key := range readers {
		apiVersion, kind, _ := strings.Cut(key, " ")
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			t.Fatalf("reader %q: %v", key, err)
		}
		if !servedKinds.Recognizes(gv.WithKind(kind)) {
			t.Errorf("servedKinds does not know %s, a kind the graph reads: add its group's AddToScheme", key)
		}
		versions[apiVersion] = true
	}
	if got := strings.Join(slices.Sorted(maps.Keys(versions)), " "); got != "apps/v1 batch/v1 retrycap.dev/v1alpha1 v1" {
		t.Fatalf("the versions the graph reads: %s", got)
	}
	for _, c := range []struct{ kind, want string }{{"Deploymnet", "Deployment"}, {"STATEFULSET", "StatefulSet"}, {"Pods", "Pod"}, {"Widget", ""}} {
		gv := schema.GroupVersion{Group: "apps", Version: "v1"}
		if c.kind == "Pods" {
			gv.Group = ""
		}
		if got := strings.Join(nearKinds(gv, c.kind), " "); got != c.want {
			t.Errorf("nearKinds(%s, %s) = %q, want %q", gv, c.kind, got, c.want)
		}
	}
}
