package analyze

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// -k on a kustomization that names a remote base or file is refused before the build, naming the
// kustomization file, the field and the value (before: kustomize ran git fetch and an HTTP GET to
// the host named, and the error, seconds later, was the resolver's). The build is never called.
func TestRedteamKustomizeRemoteRefused(t *testing.T) {
	const tail = " is remote (kustomize would fetch it with git or HTTP): retrycap reads only local files and does not reach the network; vendor it (a local copy the kustomization names), or build it yourself and give the output with -f -: kustomize build "
	cases := []struct{ name, kust, want string }{
		{"https base", "resources:\n- ../base.yaml\n- https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v3.3.1\n",
			`resources[1] "https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v3.3.1"`},
		{"scp-style git base", "bases:\n- git@github.com:org/repo//deploy?ref=main\n", `bases[0] "git@github.com:org/repo//deploy?ref=main"`},
		{"github.com without a scheme", "resources: [github.com/org/repo/deploy]\n", `resources[0] "github.com/org/repo/deploy"`},
		{"git:: prefix, upper-case scheme", "components: [\"git::HTTPS://example.com/org/repo.git\"]\n", `components[0] "git::HTTPS://example.com/org/repo.git"`},
		{"a file:// clone runs git too", "resources: [\"file:///srv/repo\"]\n", `resources[0] "file:///srv/repo"`},
		{"a patch over HTTP", "patches:\n- path: ok.yaml\n- path: http://127.0.0.1:1/p.yaml\n", `patches[1].path "http://127.0.0.1:1/p.yaml"`},
		{"a generator's file over HTTP", "configMapGenerator:\n- name: c\n  files: [a.txt, \"k=https://example.com/k.txt\"]\n", `configMapGenerator[0].files[1] "https://example.com/k.txt"`},
		{"openapi over HTTP", "openapi: {path: \"https://example.com/schema.json\"}\n", `openapi.path "https://example.com/schema.json"`},
		{"crds over HTTP", "crds: [\"https://example.com/crd.yaml\"]\n", `crds[0] "https://example.com/crd.yaml"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(tc.kust), 0o644); err != nil {
				t.Fatal(err)
			}
			built := false
			errs := (Reader{}).ReadKustomization(NewManifests(), dir, func(string) ([]byte, error) { built = true; return nil, nil })
			want := "-k " + dir + ": " + filepath.Join(dir, "kustomization.yaml") + ": " + tc.want + tail + dir + " | retrycap analyze -f -"
			if built || len(errs) != 1 || errs[0].Error() != want {
				t.Fatalf("built %v, errors %v\nwant %q", built, errs, want)
			}
			var re *RemoteError
			if !errors.As(errs[0], &re) {
				t.Fatalf("%T, want *RemoteError", errs[0])
			}
		})
	}
	// An overlay whose local base names a remote one: the base's file is named.
	dir := t.TempDir()
	for p, s := range map[string]string{
		"overlay/kustomization.yaml": "resources: [../base]\n",
		"base/Kustomization":         "resources:\n- deploy.yaml\n- ssh://git@example.com/org/repo.git\n",
		"base/deploy.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	overlay := filepath.Join(dir, "overlay")
	errs := (Reader{}).ReadKustomization(NewManifests(), overlay, func(string) ([]byte, error) { t.Fatal("built"); return nil, nil })
	want := "-k " + overlay + ": " + filepath.Join(overlay, "../base", "Kustomization") + `: resources[1] "ssh://git@example.com/org/repo.git"` + tail + overlay + " | retrycap analyze -f -"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("errors %v\nwant %q", errs, want)
	}
	// -k URL itself.
	errs = (Reader{}).ReadKustomization(NewManifests(), "https://github.com/org/repo//deploy", func(string) ([]byte, error) { t.Fatal("built"); return nil, nil })
	want = `-k https://github.com/org/repo//deploy: "https://github.com/org/repo//deploy"` + tail + "https://github.com/org/repo//deploy | retrycap analyze -f -"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("errors %v\nwant %q", errs, want)
	}
	// Local only, and a base that loops back to the overlay: built once, no loop in the check.
	loop := t.TempDir()
	for p, s := range map[string]string{"a/kustomization.yaml": "resources: [../b, cm.yaml]\n", "b/kustomization.yaml": "resources: [../a]\n", "a/cm.yaml": "kind: ConfigMap\n"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(loop, p)), 0o755)
		if err := os.WriteFile(filepath.Join(loop, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".", filepath.Join(loop, "b", "self")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(loop, "b", "kustomization.yaml"), []byte("resources: [../a, self]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	builds := 0
	errs = (Reader{}).ReadKustomization(NewManifests(), filepath.Join(loop, "a"), func(string) ([]byte, error) { builds++; return nil, nil })
	if len(errs) != 0 || builds != 1 {
		t.Fatalf("errors %v, %d build(s); want none and 1", errs, builds)
	}
}

// zeros is /dev/zero as a reader, counting what was read from it.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// A stream that never ends (-f /dev/zero) is read up to MaxInputBytes (64 MiB) and one byte and
// refused, naming it (before: read until memory ran out).
func TestRedteamEndlessInputBounded(t *testing.T) {
	z := &zeros{}
	errs := (Reader{Stdin: z}).ReadPathsInto(NewManifests(), []string{"-"})
	const want = "-: more than 64 MiB: not read (retrycap reads at most 64 MiB from one file or stream; a device such as /dev/zero, or a stream that does not end?): split the input, or name its parts one by one with -f"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("errors %v\nwant %q", errs, want)
	}
	// io.LimitReader asks for no more than is left: the bound is exact.
	if z.n != MaxInputBytes+1 {
		t.Fatalf("read %d bytes, want at most %d", z.n, MaxInputBytes+1)
	}
	// At the limit exactly, it is read.
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n"
	in += strings.Repeat("#", MaxInputBytes-len(in)-1) + "\n"
	m, errs := (Reader{Stdin: io.NopCloser(strings.NewReader(in))}).ReadPaths([]string{"-"})
	if len(errs) != 0 || m.Summary.Objects != 1 {
		t.Fatalf("errors %v, %d object(s); want none and 1", errs, m.Summary.Objects)
	}
}

// A named pipe, or a link to a device, among a directory's manifests is passed over with a
// warning (before: the read waited on the pipe forever, and read /dev/zero until memory ran out);
// named with -f a pipe is still read (a shell's <(...)).
func TestRedteamDirSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	const doc = "apiVersion: v1\nkind: Service\nmetadata: {name: c, namespace: shop}\n"
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, recursive := range []bool{false, true} {
		m, errs := (Reader{Recursive: recursive}).ReadPaths([]string{dir})
		var got []string
		for _, w := range m.Warnings {
			got = append(got, strings.TrimPrefix(w.String(), dir+"/"))
		}
		want := []string{
			"pipe.yaml: a named pipe, not a regular file: not read from a directory (it may never end, or wait for a writer forever); name it with -f to read it",
			"zero.yaml: a device, not a regular file: not read from a directory (it may never end, or wait for a writer forever); name it with -f to read it",
		}
		if len(errs) != 0 || m.Summary.Files != 1 || m.Summary.Services != 1 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("recursive %v: errors %v, %d file(s), %d Service(s), warnings\n%s\nwant none, 1, 1 and\n%s", recursive, errs, m.Summary.Files, m.Summary.Services, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// Named with -f: read, once a writer comes.
	go func() {
		f, err := os.OpenFile(filepath.Join(dir, "pipe.yaml"), os.O_WRONLY, 0)
		if err != nil {
			return
		}
		_, _ = f.WriteString(doc)
		_ = f.Close()
	}()
	m, errs := (Reader{}).ReadPaths([]string{filepath.Join(dir, "pipe.yaml")})
	if len(errs) != 0 || m.Summary.Services != 1 {
		t.Fatalf("errors %v, %d Service(s); want none and 1", errs, m.Summary.Services)
	}
}

// Names the API server refuses, and bytes a YAML parser refuses without saying where: each is an
// error naming the object, the field and the value (before: a Deployment "WEB" was read, no node
// of the graph, and the policy "selected no workload" without a word on why; invalid UTF-8 was
// "yaml: invalid leading UTF-8 octet", no byte, no line).
func TestRedteamReadRefusals(t *testing.T) {
	const policy = "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec: {maxAmplification: 4}\n---\n"
	deploy := func(meta, ann string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {" + meta + "}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata:\n      labels: {app: web}\n      annotations: {retrycap.dev/upstreams: \"" + ann + "\"}\n    spec: {containers: [{name: app, image: x}]}\n"
	}
	long := strings.Repeat("a", 254)
	const subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	cases := []struct{ name, doc, want string }{
		{"an upper-case name", policy + deploy("name: WEB, namespace: shop", "order=3"),
			`test.yaml: document 2: Deployment shop/WEB: metadata.name "WEB" is not a DNS-1123 subdomain, the API server refuses it: ` + subdomain},
		{"a name over 253 characters", policy + deploy("name: "+long+", namespace: shop", "order=3"),
			`test.yaml: document 2: Deployment shop/` + long + `: metadata.name "` + long[:70] + `"... (254 bytes) is not a DNS-1123 subdomain, the API server refuses it: must be no more than 253 characters`},
		{"an upper-case namespace", policy + deploy("name: web, namespace: Shop", "order=3"),
			`test.yaml: document 2: Deployment Shop/web: metadata.namespace "Shop" is not a DNS-1123 label, the API server refuses it: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"a Service named with a leading digit", policy + "apiVersion: v1\nkind: Service\nmetadata: {name: 1web, namespace: shop}\n",
			`test.yaml: document 2: Service shop/1web: metadata.name "1web" is not a DNS-1035 label, the API server refuses it: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		{"a policy named with an underscore", strings.Replace(policy, "name: p,", "name: my_p,", 1),
			`test.yaml: document 1: RetryPolicy shop/my_p: metadata.name "my_p" is not a DNS-1123 subdomain, the API server refuses it: ` + subdomain},
		{"invalid UTF-8 (Latin-1) in a value", policy + deploy("name: web, namespace: shop", "caf\xe9=3"),
			"test.yaml: document 2: yaml: invalid trailing UTF-8 octet (byte 0xE9 at line 14, column 49)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := (Reader{}).Read(NewManifests(), "test.yaml", strings.NewReader(tc.doc))
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Fatalf("errors %q\nwant %q", errs, tc.want)
			}
		})
	}
}

// A retrycap annotation written null (a template that rendered nothing: "upstreams: {{ .Values.up
// }}") is read as "" as the API server stores it, and said (before: the workload declared nothing
// and the policy passed without a word).
func TestRedteamNullAnnotation(t *testing.T) {
	const doc = "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec: {maxAmplification: 4}\n---\n" +
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata:\n      labels: {app: web}\n      annotations:\n        retrycap.dev/upstreams:\n        other: null\n    spec: {containers: [{name: app, image: x}]}\n---\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: solo, namespace: shop, annotations: {retrycap.dev/upstreams: ~}}\nspec: {containers: [{name: app, image: x}]}\n"
	m := NewManifests()
	if errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(doc)); len(errs) != 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, w := range m.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		`test.yaml: document 2: Deployment shop/web: spec.template.metadata.annotations["retrycap.dev/upstreams"] is null (YAML's empty value: a template that rendered nothing?): read as "", as the API server stores it; quote the value, or leave the key out`,
		`test.yaml: document 3: Pod shop/solo: metadata.annotations["retrycap.dev/upstreams"] is null (YAML's empty value: a template that rendered nothing?): read as "", as the API server stores it; quote the value, or leave the key out`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || m.Summary.WithUpstreams != 0 || m.Summary.Workloads != 2 {
		t.Fatalf("warnings\n%s\nwant\n%s\n(%d workload(s), %d with upstreams; want 2, 0)", strings.Join(got, "\n"), strings.Join(want, "\n"), m.Summary.Workloads, m.Summary.WithUpstreams)
	}
}

// Lists nested in Lists are read to 32 levels; deeper is an error naming the document (before:
// each level decoded its items again, and 4,000 levels of a 175 KB document took 6 s and 524 MB
// of memory; at 5,000 the YAML parser's own depth limit refuses it).
func TestRedteamNestedListsBounded(t *testing.T) {
	nested := func(n int) string {
		return strings.Repeat(`{"apiVersion":"v1","kind":"List","items":[`, n) +
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"c","namespace":"shop"}}` + strings.Repeat("]}", n)
	}
	m := NewManifests()
	if errs := (Reader{}).Read(m, "test.json", strings.NewReader(nested(32))); len(errs) != 0 || m.Summary.Services != 1 {
		t.Fatalf("32 levels: errors %v, %d Service(s); want none and 1", errs, m.Summary.Services)
	}
	const want = "test.json: document 1, item 1: v1 List: a List nested more than 32 deep: not read (kubectl flattens a List in a List; no tool writes them this deep)"
	for _, n := range []int{33, 4000} {
		m := NewManifests()
		errs := (Reader{}).Read(m, "test.json", strings.NewReader(nested(n)))
		if len(errs) != 1 || errs[0].Error() != want || m.Summary.Services != 0 {
			t.Fatalf("%d levels: errors %q, %d Service(s); want %q and none", n, errs, m.Summary.Services, want)
		}
	}
}

// A document whose aliases expand it past 64 MiB is refused before it is expanded (before: 200
// aliases of a 1 MiB string, a 1 MiB file, were expanded to 200 MiB of JSON, 7.3 s and 816 MB
// of memory; the parser's guard counts aliases, not bytes). Aliases and merge keys of an ordinary
// size are read as before.
func TestRedteamAliasExpansionBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol, namespace: shop}\ndata:\n  a: &a \"" + strings.Repeat("x", 1<<20) + "\"\n")
	for i := range 64 {
		fmt.Fprintf(&b, "  k%d: *a\n", i)
	}
	m := NewManifests()
	errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(b.String()))
	const want = "test.yaml: document 1: ConfigMap shop/lol: yaml: its aliases (*name) expand it to more than 64 MiB: not read (an alias bomb? retrycap reads at most 64 MiB of a file or a document)"
	if len(errs) != 1 || errs[0].Error() != want || m.Summary.Objects != 0 {
		t.Fatalf("errors %q, %d object(s); want %q and none", errs, m.Summary.Objects, want)
	}
	const ok = "apiVersion: v1\nkind: Service\nmetadata:\n  name: c\n  namespace: shop\n  labels: &l {app: c, tier: web}\n  annotations:\n    <<: *l\n    tier: api\nspec: {selector: *l}\n"
	m = NewManifests()
	if errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(ok)); len(errs) != 0 || m.Summary.Services != 1 {
		t.Fatalf("ordinary aliases: errors %v, %d Service(s); want none and 1", errs, m.Summary.Services)
	}
}
