package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/analyze"
)

// cappedZeros is /dev/zero as a reader, counting what was read from it; past limit it fails,
// so that a reader without a bound fails the test instead of exhausting the machine's memory.
type cappedZeros struct{ n, limit int64 }

func (z *cappedZeros) Read(p []byte) (int, error) {
	if z.n >= z.limit {
		return 0, errors.New("read past the test's limit")
	}
	p = p[:min(int64(len(p)), z.limit-z.n)]
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// discover -f - (and -f FILE) on a stream that never ends is read up to analyze.MaxInputBytes
// (64 MiB) and one byte and refused, naming it, as analyze refuses it (before: discover read
// stdin and files whole with no bound, -f /dev/zero until memory ran out).
func TestDiscoverEndlessInputBounded(t *testing.T) {
	z := &cappedZeros{limit: 4 * analyze.MaxInputBytes}
	var out, errb bytes.Buffer
	code := execute([]string{"discover", "-f", "-"}, z, &out, &errb)
	const want = "error: -: more than 64 MiB: not read (retrycap reads at most 64 MiB from one file or stream; a device such as /dev/zero, or a stream that does not end?): split the input, or name its parts one by one with -f\n" +
		"retrycap: discover: 1 error(s) in the input\n"
	if code != 2 || out.String() != "" || errb.String() != want {
		t.Fatalf("exit %d, stdout %q, stderr\n%s\nwant exit 2, no stdout, stderr\n%s", code, out.String(), errb.String(), want)
	}
	if z.n != analyze.MaxInputBytes+1 {
		t.Fatalf("read %d bytes, want %d (the bound and one byte)", z.n, analyze.MaxInputBytes+1)
	}
	// A file at the bound exactly is read.
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n"
	in += strings.Repeat("#", analyze.MaxInputBytes-len(in)-1) + "\n"
	code, _, stderr := run(t, in, "discover", "-f", "-")
	if strings.Contains(stderr, "more than 64 MiB") || code != 2 || !strings.Contains(stderr, "nothing") {
		t.Fatalf("exit %d, stderr %q: want the file read and nothing found (exit 2)", code, stderr)
	}
}

// discoverUpstreams runs discover -o json on args and returns each workload's upstreams by
// "Kind ns/name", and stderr.
func discoverUpstreams(t *testing.T, args ...string) (map[string][]string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := execute(append([]string{"discover", "-o", "json"}, args...), strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d, stderr\n%s", code, errb.String())
	}
	var res struct {
		Workloads []struct {
			Kind, Namespace, Name string
			Upstreams             []string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v in\n%s", err, out.String())
	}
	got := map[string][]string{}
	for _, w := range res.Workloads {
		got[w.Kind+" "+w.Namespace+"/"+w.Name] = w.Upstreams
	}
	return got, errb.String()
}

// A workload given twice (linkerd2's test/integration read with -R: Deployment default/slow-cooker
// in five files) is the later, in discover as in analyze: its calls are the later object's only
// (before: the calls of every copy, nginx from the one analyze had replaced).
func TestDiscoverObjectGivenTwiceIsTheLater(t *testing.T) {
	got, stderr := discoverUpstreams(t, "-f", "testdata/discover/input19/linkerd-slow-cooker")
	if want := map[string][]string{"Deployment default/slow-cooker": {"backend-svc"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("upstreams %v, want %v", got, want)
	}
	const warn = "warning: testdata/discover/input19/linkerd-slow-cooker/2-trafficsplit-application.yaml: document 3: Deployment default/slow-cooker is also at testdata/discover/input19/linkerd-slow-cooker/1-localhost-slow-cooker.yaml: document 1: the later wins\n"
	if stderr != warn {
		t.Fatalf("stderr\n%s\nwant\n%s", stderr, warn)
	}
}

// A ConfigMap's value that the container's env overrides is not the container's (the kubelet:
// env over envFrom, a later entry over an earlier, a Secret's value over a ConfigMap's): before,
// legacy-order, legacy-payment and legacy-stock were proposed beside the calls the app makes.
func TestDiscoverEnvOverridesEnvFrom(t *testing.T) {
	got, stderr := discoverUpstreams(t, "-f", "testdata/discover/input19/env-override.yaml")
	if want := map[string][]string{"Deployment shop/web": {"cart", "order", "stock"}}; fmt.Sprint(got) != fmt.Sprint(want) || stderr != "" {
		t.Fatalf("upstreams %v, stderr %q; want %v, none", got, stderr, want)
	}
}

// discover's warnings are grouped on stderr as analyze's are (a directory of Istio's samples read
// with -R gave 117 lines of "is also at", one per object given twice), and listed whole in -o
// json, reading's with the result's (before: reading's were on stderr only, one line each).
func TestDiscoverWarningsGrouped(t *testing.T) {
	dir := t.TempDir()
	var svcs, deploy strings.Builder
	for _, n := range []string{"a", "b", "c", "d"} {
		fmt.Fprintf(&svcs, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: shop}\nspec: {selector: {app: %s}, ports: [{name: http, port: 8080}]}\n", n, n)
	}
	deploy.WriteString("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: x, env: [{name: A_URL, value: \"http://a:8080\"}]}]}\n")
	for _, f := range []struct{ name, body string }{{"1.yaml", svcs.String()}, {"2.yaml", svcs.String()}, {"3.yaml", deploy.String()}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := execute([]string{"discover", "-f", dir, "-o", "json"}, strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d, stderr\n%s", code, errb.String())
	}
	f1, f2 := filepath.Join(dir, "1.yaml"), filepath.Join(dir, "2.yaml")
	want := "warning: " + f2 + ": document 1: Service shop/a is also at " + f1 + ": document 1: the later wins (and 3 more like it; -o json lists them all)\n"
	if errb.String() != want {
		t.Fatalf("stderr\n%s\nwant\n%s", errb.String(), want)
	}
	var res struct{ Warnings []string }
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 4 || res.Warnings[3] != f2+": document 4: Service shop/d is also at "+f1+": document 4: the later wins" {
		t.Fatalf("warnings %q: want the 4, the last of Service shop/d", res.Warnings)
	}
}

// A document analyze skips (a Helm template that parses) is no workload for discover either:
// before, it proposed a patch for Deployment shop/{{ .Release.Name }}-web from its env, exit 0.
func TestDiscoverSkipsWhatAnalyzeSkips(t *testing.T) {
	code, out, stderr := run(t, "", "discover", "-f", "testdata/discover/input19/helm-template-parses.yaml.tmpl", "-o", "patch")
	const wantOut = "# nothing to patch: no workload with a call was found\n"
	const wantErr = `warning: testdata/discover/input19/helm-template-parses.yaml.tmpl: document 1: looks like a Helm template (metadata.name "{{ .Release.Name }}-web", metadata.namespace "shop"): skipped (run helm template first)` + "\n" +
		"retrycap: discover: nothing found: no env value of 0 workload(s) names a Service\n"
	if code != ExitBadInput || out != wantOut || stderr != wantErr {
		t.Fatalf("exit %d, stdout\n%s\nstderr\n%s\nwant exit %d, stdout\n%s\nstderr\n%s", code, out, stderr, ExitBadInput, wantOut, wantErr)
	}
}

// A host under a top-level domain of the Internet (grpcs://foo.com, Kuma's global control plane
// address) is not Service foo of namespace com: before, foo.com was proposed as an upstream.
func TestDiscoverInternetHostIsNoService(t *testing.T) {
	got, stderr := discoverUpstreams(t, "-f", "testdata/discover/input19/kuma-global-address.yaml")
	if want := map[string][]string{"Deployment kuma-system/kuma-control-plane": {"kuma-other"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("upstreams %v, want %v", got, want)
	}
	const warn = `warning: env: 1 value(s) name a host under a top-level domain of the Internet (name.com, name.io) and the input holds no Service of such a namespace: hosts outside the cluster, not edges (e.g. Deployment kuma-system/kuma-control-plane env KUMA_MULTIZONE_ZONE_GLOBAL_ADDRESS="grpcs://foo.com")` + "\n"
	if stderr != warn {
		t.Fatalf("stderr\n%s\nwant\n%s", stderr, warn)
	}
}

// $(NAME) in an env value or an argument is expanded as the kubelet expands it: before,
// "http://$(ORDER_HOST):8080/orders" and "--cart=$(CART_ADDR)" named nothing. A reference to a
// variable defined after it, and an escaped $$(NAME), stay as written (late and stock are not
// called).
func TestDiscoverExpandsEnvReferences(t *testing.T) {
	got, stderr := discoverUpstreams(t, "-f", "testdata/discover/input19/env-expand.yaml")
	if want := map[string][]string{"Deployment shop/web": {"cart", "order"}}; fmt.Sprint(got) != fmt.Sprint(want) || stderr != "" {
		t.Fatalf("upstreams %v, stderr %q; want %v, none", got, stderr, want)
	}
}

// The containers other meshes and runtimes inject (Kuma's kuma-sidecar and kuma-init, Dapr's
// daprd) address their control planes, not the app's upstreams: before,
// kuma-control-plane.kuma-system, dapr-api.dapr-system and dapr-sentry.dapr-system were proposed
// beside the app's one call.
func TestDiscoverSkipsInjectedDataPlanes(t *testing.T) {
	got, stderr := discoverUpstreams(t, "-f", "testdata/discover/input19/kuma-dapr-injected.yaml")
	if want := map[string][]string{"Pod shop/busybox": {"order"}}; fmt.Sprint(got) != fmt.Sprint(want) || stderr != "" {
		t.Fatalf("upstreams %v, stderr %q; want %v, none", got, stderr, want)
	}
}

// A document both readers refuse is one error, analyze's, which names the object, the field and
// the value: before, the env reader's "decoding a Deployment: json: cannot unmarshal number into
// Go struct field EnvVar.spec.template.spec.containers.env.value of type string" came first, for
// the same document.
func TestDiscoverOneErrorPerBadDocument(t *testing.T) {
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {X: \"1\"}\n---\n# a comment only\n---\n" +
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n" +
		"    spec: {containers: [{name: a, image: x, env: [{name: PORT, value: 8080}]}]}\n"
	code, out, stderr := run(t, in, "discover", "-f", "-")
	const want = "error: -: document 2: Deployment shop/web: spec.template.spec.containers[0].env[0].value: 8080 is a number, want a string (quote it)\n" +
		"retrycap: discover: 1 error(s) in the input\n"
	if code != ExitBadInput || out != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q, stderr\n%s\nwant exit 2, stderr\n%s", code, out, stderr, want)
	}
}
