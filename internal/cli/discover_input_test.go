package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
