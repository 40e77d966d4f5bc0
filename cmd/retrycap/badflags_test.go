package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadFlagValuesExit2 runs the built retrycap as a user does, each command with a flag given
// a bad value: each exits 2 (bad input) with exactly one error naming the flag and the value,
// writes nothing on stdout, never panics, and never starts the work (no cluster, Prometheus or
// process is reached: the cases that would reach one point at nothing). Before: a missing -f
// file said "stat PATH" (a system call, not the flag) and a missing --kubeconfig "stat PATH"
// too, a --context the kubeconfig lacks client-go's `context "x" does not exist`.
func TestBadFlagValuesExit2(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "retrycap")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sample, err := filepath.Abs("../../config/samples/incident18.yaml")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	empty := filepath.Join(dir, "empty")
	notes := filepath.Join(dir, "notes")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	badKubeconfig := filepath.Join(dir, "bad-kubeconfig")
	for p, data := range map[string]string{
		filepath.Join(notes, "README.txt"): "not a manifest\n",
		// A cluster at a port nothing listens on: no case may get as far as dialling it.
		kubeconfig:    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\ncontexts:\n- name: dev\n  context: {cluster: c, user: u}\n- name: prod\n  context: {cluster: c, user: u}\ncurrent-context: dev\nusers:\n- name: u\n  user: {token: t}\n",
		badKubeconfig: "clusters: [\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		args   []string
		stderr string
	}{
		// analyze
		{[]string{"analyze", "-f", sample, "-o", "yml"}, `retrycap: analyze: unknown output "yml" (table, json, dot, mermaid, tree, patch, sarif)` + "\n"},
		{[]string{"analyze", "-f", missing}, "error: -f " + missing + ": no such file or directory\nretrycap: analyze: 1 error(s) in the input\n"},
		{[]string{"analyze", "-k", empty}, "error: -k " + empty + ": unable to find one of 'kustomization.yaml', 'kustomization.yml' or 'Kustomization' in directory '" + empty + "'\nretrycap: analyze: 1 error(s) in the input\n"},
		{[]string{"analyze", "-f", sample, "--istio-default-retries=-1"}, "retrycap: analyze: --istio-default-retries -1: must be 0 or more\n"},
		{[]string{"analyze", "-f", sample, "--istio-default-retries=two"}, `retrycap: invalid argument "two" for "--istio-default-retries" flag: strconv.ParseInt: parsing "two": invalid syntax` + "\n"},
		{[]string{"analyze", "-f", sample, "--meshed-namespace", "shop=consul"}, `retrycap: analyze: --meshed-namespace: namespace shop: unknown mesh "consul" (istio or linkerd)` + "\n"},
		{[]string{"analyze", "-f", sample, "-n", "Shop_1"}, `retrycap: analyze: -n "Shop_1": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed` + "\n"},
		// discover
		{[]string{"discover", "-f", sample, "--since=-5m"}, "retrycap: discover: --since -5m0s: want whole seconds, at least 1s\n"},
		{[]string{"discover", "-f", sample, "--since=5"}, `retrycap: invalid argument "5" for "--since" flag: time: missing unit in duration "5"` + "\n"},
		{[]string{"discover", "-f", sample, "--prometheus-max-answer-size=1e9x"}, `retrycap: invalid argument "1e9x" for "--prometheus-max-answer-size" flag: not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)` + "\n"},
		{[]string{"discover", "--prometheus-url", "prometheus:9090"}, `retrycap: discover: --prometheus-url "prometheus:9090": want an http or https URL with a host` + "\n"},
		{[]string{"discover", "--prometheus-url", "http://127.0.0.1:1", "--prometheus-timeout=-1s"}, "retrycap: discover: --prometheus-timeout -1s: want more than 0 (leave the flag out for the default, 10s)\n"},
		{[]string{"discover", "-f", sample, "-o", "yml"}, `retrycap: discover: unknown output "yml" (yaml, json, patch)` + "\n"},
		{[]string{"discover", "-f", missing}, "error: -f " + missing + ": no such file or directory\nretrycap: discover: 1 error(s) in the input\n"},
		// graph: the kubeconfig, the context and the flags checked before any request.
		{[]string{"graph", "--kubeconfig", missing}, `retrycap: graph: loading the kubeconfig: --kubeconfig "` + missing + `": no such file or directory` + "\n"},
		{[]string{"graph", "--kubeconfig", empty}, `retrycap: graph: loading the kubeconfig: --kubeconfig "` + empty + `": error loading config file "` + empty + `": read ` + empty + ": is a directory\n"},
		{[]string{"graph", "--kubeconfig", badKubeconfig}, `retrycap: graph: loading the kubeconfig: --kubeconfig "` + badKubeconfig + `": error loading config file "` + badKubeconfig + `": yaml: line 1: did not find expected node content` + "\n"},
		{[]string{"graph", "--kubeconfig", kubeconfig, "--context", "staging"}, `retrycap: graph: loading the kubeconfig: --context "staging": not in the kubeconfig (its contexts: dev, prod)` + "\n"},
		{[]string{"graph", "--kubeconfig", kubeconfig, "-o", "yml"}, `retrycap: graph: unknown output "yml" (tree, json, dot, mermaid)` + "\n"},
		{[]string{"graph", "--kubeconfig", kubeconfig, "-n", "Shop"}, `retrycap: graph: -n "Shop": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed` + "\n"},
		// observe
		{[]string{"observe", "-f", missing}, "observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\nretrycap: observe: -f " + missing + ": no such file or directory\n"},
		{[]string{"observe", "-f", notes, "-o", "yml"}, `retrycap: observe: unknown output "yml" (table, json, sql, logql, csv)` + "\n"},
		{[]string{"observe", "--from-cluster", "--kubeconfig", kubeconfig, "--since=-5m"}, "retrycap: observe: --since -5m0s: must be >= 0\n"},
		{[]string{"observe", "--from-cluster", "--kubeconfig", missing}, "observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\nretrycap: observe: loading the kubeconfig: --kubeconfig \"" + missing + "\": no such file or directory\n"},
		{[]string{"observe", "--from-cluster", "--kubeconfig", kubeconfig, "--context", "staging"}, "observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\nretrycap: observe: loading the kubeconfig: --context \"staging\": not in the kubeconfig (its contexts: dev, prod)\n"},
		{[]string{"observe", "-f", notes, "--max-line=0"}, "retrycap: observe: --max-line 0: must be at least 1024 bytes\n"},
		{[]string{"observe", "-o", "sql", "--dialect", "mysql"}, `retrycap: observe: --dialect "mysql": want postgres or clickhouse` + "\n"},
		{[]string{"observe", "-o", "logql", "--since", "0s"}, "retrycap: observe: --since 0s: -o logql needs a range (leave the flag out for the default, 1h)\n"},
		// storm and demo: refused before any process starts.
		{[]string{"storm", "--duration=-5m"}, "retrycap: --duration -5m0s: want more than 0 (leave the flag out for the default, 50s)\n"},
		{[]string{"storm", "-o", "yml"}, `retrycap: -o "yml": unknown, want text or json` + "\n"},
		{[]string{"storm", "--rps", "abc"}, `retrycap: invalid argument "abc" for "--rps" flag: strconv.ParseInt: parsing "abc": invalid syntax` + "\n"},
		{[]string{"storm", "--proxy-binary", missing}, `retrycap: storm: proxy binary "` + missing + `": stat ` + missing + ": no such file or directory\n"},
		{[]string{"demo", "--chart", filepath.Join(missing, "x.svg")}, `retrycap: demo: --chart: storm: chart path "` + filepath.Join(missing, "x.svg") + `": its directory: stat ` + missing + ": no such file or directory\n"},
		// Every command: a flag it does not have.
		{[]string{"analyze", "--sinc", "5m"}, "retrycap: unknown flag: --sinc\n"},
	} {
		cmd := exec.Command(bin, c.args...)
		// No cluster reachable from the environment: a case that loaded the kubeconfig of the
		// machine running the test would not be bad input.
		cmd.Env = append(os.Environ(), "KUBECONFIG="+missing, "KUBERNETES_SERVICE_HOST=")
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if code != 2 || stdout.Len() != 0 || stderr.String() != c.stderr {
			t.Errorf("retrycap %s: exit %d, stdout %q, stderr\n%s\nwant exit 2, no stdout, stderr\n%s", strings.Join(c.args, " "), code, stdout.String(), stderr.String(), c.stderr)
		}
	}
}
