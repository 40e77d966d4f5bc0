package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestExamplesNameTheBinary: the examples in a command's help call the binary that was run. The
// plugin's `kubectl retrycap analyze --help` showed "retrycap analyze -f deploy/", a command a
// plugin user does not have.
func TestExamplesNameTheBinary(t *testing.T) {
	for _, tt := range []struct{ argv0, want string }{
		{"/usr/local/bin/kubectl-retrycap", `Examples:
  kubectl retrycap graph -n shop
  kubectl retrycap graph checkout -n shop -o dot | dot -Tsvg > checkout.svg
  kubectl retrycap graph -A -o json
`},
		{"/usr/local/bin/retrycap", `Examples:
  retrycap graph -n shop
  retrycap graph checkout -n shop -o dot | dot -Tsvg > checkout.svg
  retrycap graph -A -o json
`},
	} {
		var out bytes.Buffer
		root := NewRoot(nil, &out, &out)
		applyInvocationName(root, tt.argv0)
		root.AddCommand(NewAnalyzeCmd(nil, &out, &out), NewGraphCmd(nil, &out, &out), NewObserveCmd(nil, &out, &out), NewDiscoverCmd(nil, &out, &out))
		if code := Execute(root, []string{"graph", "--help"}); code != 0 {
			t.Fatalf("%s graph --help: exit %d\n%s", tt.argv0, code, out.String())
		}
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("%s graph --help:\n%s\nwant its examples:\n%s", tt.argv0, out.String(), tt.want)
		}
		// Every example line of every command: a pipe into the CLI too.
		for _, c := range root.Commands() {
			for _, line := range strings.Split(c.Example, "\n") {
				plugin := strings.Count(line, "kubectl retrycap ")
				bare := strings.Count(line, "retrycap "+c.Name()) - plugin
				if strings.Contains(tt.argv0, "kubectl-") && bare > 0 || !strings.Contains(tt.argv0, "kubectl-") && plugin > 0 {
					t.Errorf("%s %s: example %q calls the other binary", tt.argv0, c.Name(), line)
				}
			}
		}
	}
}

// TestDiscoverNamespaceHelp: discover's -n line said "without -n, every namespace" and then
// "(default "default")", which read as a contradiction; it now says what each is for.
func TestDiscoverNamespaceHelp(t *testing.T) {
	var out bytes.Buffer
	root := NewRoot(nil, &out, &out)
	root.AddCommand(NewDiscoverCmd(nil, &out, &out))
	if code := Execute(root, []string{"discover", "--help"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := `  -n, --namespace string                      only the workloads of this namespace, also the namespace of manifests' objects that name none; without -n every namespace is read and those objects are in "default" (default "default")` + "\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("discover --help:\n%s\nwant the line\n%s", out.String(), want)
	}
}

// TestExamplesOnTheRepositoryRun: an example that names the repository's own files (config/)
// runs, from the repository's root, up to its first pipe or redirect, without bad input.
// analyze's "retrycap analyze -f config/samples -o dot" exited 2 (config/samples holds a
// kustomization: -k).
func TestExamplesOnTheRepositoryRun(t *testing.T) {
	t.Chdir("../..")
	n := 0
	var out bytes.Buffer
	for _, c := range []*cobra.Command{NewAnalyzeCmd(nil, &out, &out), NewGraphCmd(nil, &out, &out), NewObserveCmd(nil, &out, &out), NewDiscoverCmd(nil, &out, &out)} {
		for _, line := range strings.Split(c.Example, "\n") {
			_, call, ok := strings.Cut(line, "retrycap "+c.Name()+" ")
			if !ok || !strings.Contains(call, "config/") {
				continue
			}
			call, _, _ = strings.Cut(call, "|")
			call, _, _ = strings.Cut(call, ">")
			out.Reset()
			root := NewRoot(strings.NewReader(""), &out, &out)
			root.AddCommand(NewAnalyzeCmd(strings.NewReader(""), &out, &out), NewGraphCmd(nil, &out, &out), NewObserveCmd(nil, &out, &out), NewDiscoverCmd(nil, &out, &out))
			if code := Execute(root, append([]string{c.Name()}, strings.Fields(call)...)); code == ExitBadInput {
				t.Errorf("example %q: exit %d\n%s", strings.TrimSpace(line), code, out.String())
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no example names config/: nothing checked")
	}
}

// TestObserveRefusesATerminal: `retrycap observe` without -f, typed at a terminal, waited for
// log lines typed by hand without a word; it now says how to give the logs. A pseudo-terminal's
// master side is a terminal to isatty, as a shell's stdin is.
func TestObserveRefusesATerminal(t *testing.T) {
	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("a pseudo-terminal for stdin: %v", err)
	}
	defer tty.Close()
	for _, tt := range []struct {
		argv0, want string
	}{
		{"retrycap", `retrycap: observe: no logs given: pipe them in (kubectl logs deploy/NAME -c retrycap-proxy | retrycap observe), or name them with -f LOGS, or read the pods' with --from-cluster -l SELECTOR; "-f -" reads a terminal's lines` + "\n"},
		{"kubectl-retrycap", `retrycap: observe: no logs given: pipe them in (kubectl logs deploy/NAME -c retrycap-proxy | kubectl retrycap observe), or name them with -f LOGS, or read the pods' with --from-cluster -l SELECTOR; "-f -" reads a terminal's lines` + "\n"},
	} {
		var stdout, stderr bytes.Buffer
		root := NewRoot(tty, &stdout, &stderr)
		applyInvocationName(root, tt.argv0)
		root.AddCommand(NewObserveCmd(tty, &stdout, &stderr))
		if code := Execute(root, []string{"observe"}); code != ExitBadInput || stderr.String() != tt.want || stdout.Len() != 0 {
			t.Errorf("%s observe on a terminal: exit %d, stdout %q, stderr %q; want 2 and %q", tt.argv0, code, stdout.String(), stderr.String(), tt.want)
		}
	}
	// Piped stdin is read as before (here: nothing in it, so nothing to report).
	var out bytes.Buffer
	root := NewRoot(strings.NewReader(""), &out, &out)
	root.AddCommand(NewObserveCmd(strings.NewReader(""), &out, &out))
	if code := Execute(root, []string{"observe"}); code != ExitBadInput || !strings.Contains(out.String(), "observe: 0 lines read") {
		t.Errorf("observe on an empty pipe: exit %d\n%s", code, out.String())
	}
}

// noRetrycapKinds is a cluster without retrycap's CRDs: every list of a retrycap kind is a
// no-match error, as client-go's REST mapper gives it.
type noRetrycapKinds struct{ client.Reader }

func (noRetrycapKinds) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	kind := strings.TrimSuffix(fmt.Sprintf("%T", list), "List")
	return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "retrycap.dev", Kind: kind[strings.LastIndex(kind, ".")+1:]}, SearchedVersions: []string{"v1alpha1"}}
}

// TestGraphWithoutRetrycap: graph against a cluster retrycap is not installed in said `no matches
// for kind "RetryPolicy" in version "retrycap.dev/v1alpha1"`; it now says retrycap is not
// installed there and how to install it.
func TestGraphWithoutRetrycap(t *testing.T) {
	_, _, err := liveReport(context.Background(), noRetrycapKinds{}, "shop", "")
	want := "the cluster serves no RetryPolicy (retrycap.dev/v1alpha1): retrycap is not installed there (helm install retrycap charts/retrycap: docs/helm.md; the CRDs alone: make install)"
	if err == nil || err.Error() != want {
		t.Errorf("liveReport: %v, want %q", err, want)
	}
}
