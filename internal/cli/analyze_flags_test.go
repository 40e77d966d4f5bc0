package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestAnalyzeFlagValues: each wrong flag value is exit 2 naming the flag and the value, before
// any report.
func TestAnalyzeFlagValues(t *testing.T) {
	const in = "../../config/samples/cluster-chain.yaml"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "yaml"}, `retrycap: analyze: unknown output "yaml" (table, json, dot, mermaid, tree, patch, sarif)`},
		{[]string{"--istio-default-retries", "-3"}, `retrycap: analyze: --istio-default-retries -3: must be 0 or more`},
		{[]string{"--istio-default-retries", "x"}, `retrycap: invalid argument "x" for "--istio-default-retries" flag: strconv.ParseInt: parsing "x": invalid syntax`},
		{[]string{"--meshed-namespace", "shop"}, `retrycap: analyze: --meshed-namespace "shop": want NAMESPACE=istio or NAMESPACE=linkerd`},
		{[]string{"--meshed-namespace", "shop=consul"}, `retrycap: analyze: --meshed-namespace: namespace shop: unknown mesh "consul" (istio or linkerd)`},
		// Before: read as "storefront has no labels" (storefront=), the check run on that.
		{[]string{"--namespace-labels", "storefront"}, `retrycap: analyze: --namespace-labels "storefront": want NAMESPACE=KEY=VALUE,...`},
		{[]string{"--namespace-labels", "=team=a"}, `retrycap: analyze: --namespace-labels "=team=a": want NAMESPACE=KEY=VALUE,...`},
		{[]string{"--namespace-labels", "storefront=team"}, `retrycap: analyze: --namespace-labels: namespace storefront: label "team": want KEY=VALUE`},
		// Before: both taken as the namespace of the objects that name none, the check run.
		{[]string{"-n", ""}, `retrycap: analyze: -n "": not a namespace name (a DNS-1123 label): empty label`},
		{[]string{"-n", "Bad_NS"}, `retrycap: analyze: -n "Bad_NS": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed`},
		// Before: the last one won, without a word (with team=b the policy selected nothing
		// there, exit 0).
		{[]string{"--namespace-labels", "storefront=team=a", "--namespace-labels", "storefront=team=b"}, `retrycap: analyze: --namespace-labels "storefront=team=b": namespace storefront given twice (first "storefront=team=a")`},
		{[]string{"--meshed-namespace", "shop=istio", "--meshed-namespace", "shop=linkerd"}, `retrycap: analyze: --meshed-namespace "shop=linkerd": namespace shop given twice (first "shop=istio")`},
		// Before: the second "-" read an empty stdin: "read: 2 file(s)".
		{[]string{"-f", "-", "-f", "-"}, `retrycap: analyze: -f - (stdin) given twice: it is read once`},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(append([]string{"analyze", "-f", in}, tt.args...), strings.NewReader(""), &stdout, &stderr)
		if code != ExitBadInput || stderr.String() != tt.want+"\n" || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// TestDiscoverFlagValues: discover's wrong flag values, exit 2 naming the flag and the value,
// before Prometheus is asked (the URL below has nothing listening).
func TestDiscoverFlagValues(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "table"}, `retrycap: discover: unknown output "table" (yaml, json, patch)`},
		{[]string{"--since", "90500ms"}, `retrycap: discover: --since 1m30.5s: want whole seconds, at least 1s`},
		{[]string{"--since", "0"}, `retrycap: discover: --since 0s: want whole seconds, at least 1s`},
		// Before: 0 and -1s were the default 10 s, a series limit of 0 the default 10000.
		{[]string{"--prometheus-timeout", "0"}, `retrycap: discover: --prometheus-timeout 0s: want more than 0 (leave the flag out for the default, 10s)`},
		{[]string{"--prometheus-timeout", "-1s"}, `retrycap: discover: --prometheus-timeout -1s: want more than 0 (leave the flag out for the default, 10s)`},
		{[]string{"--prometheus-series-limit", "0"}, `retrycap: discover: --prometheus-series-limit 0: want at least 1 (leave the flag out for the default, 10000)`},
		// Before: Prometheus was queried and the run ended "nothing found" (no workload is in
		// a namespace "" or "Bad_NS"), or the gateway never matched a caller.
		{[]string{"-n", ""}, `retrycap: discover: -n "": not a namespace name (a DNS-1123 label): empty label`},
		{[]string{"-n", "Bad_NS"}, `retrycap: discover: -n "Bad_NS": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed`},
		{[]string{"-f", "-", "-f", "-"}, `retrycap: discover: -f - (stdin) given twice: it is read once`},
		{[]string{"--gateway", ""}, `retrycap: discover: --gateway "": want NAME or NAMESPACE/NAME (a DNS-1123 label, a workload name)`},
		{[]string{"--gateway", "a/b/c"}, `retrycap: discover: --gateway "a/b/c": want NAME or NAMESPACE/NAME (a DNS-1123 label, a workload name)`},
		{[]string{"--gateway", "Bad Name"}, `retrycap: discover: --gateway "Bad Name": want NAME or NAMESPACE/NAME (a DNS-1123 label, a workload name)`},
		{[]string{"--gateway", "Shop/ingress"}, `retrycap: discover: --gateway "Shop/ingress": want NAME or NAMESPACE/NAME (a DNS-1123 label, a workload name)`},
		// Before: accepted, the port refused only when the first query dialled.
		{[]string{"--prometheus-url", "http://127.0.0.1:99999"}, `retrycap: discover: --prometheus-url "http://127.0.0.1:99999": port 99999: want 1..65535`},
		// Before: found by the first query, in a message that led with the query.
		{[]string{"--prometheus-bearer-token-file", "/nonexistent/token"}, `retrycap: discover: --prometheus-bearer-token-file "/nonexistent/token": stat /nonexistent/token: no such file or directory`},
		{[]string{"--prometheus-bearer-token-file", "."}, `retrycap: discover: --prometheus-bearer-token-file ".": a directory, want a file`},
		{[]string{"--prometheus-username", "u", "--prometheus-password-file", "/nonexistent/pw"}, `retrycap: discover: --prometheus-password-file "/nonexistent/pw": stat /nonexistent/pw: no such file or directory`},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(append([]string{"discover", "--prometheus-url", "http://127.0.0.1:1"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
		if code != ExitBadInput || stderr.String() != tt.want+"\n" || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// TestGraphFlagValues: graph's wrong flag values and combinations, exit 2 naming the flag and
// the value, before the kubeconfig is loaded (there is none: that error would show).
func TestGraphFlagValues(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		// Before: -o sarif passed the check (analyze's renderers) and -n with -A took -A.
		{[]string{"-o", "sarif"}, `retrycap: graph: unknown output "sarif" (tree, json, dot, mermaid)`},
		{[]string{"-n", "shop", "-A"}, `retrycap: graph: -n and -A exclude each other`},
		{[]string{"-n", "Bad_NS"}, `retrycap: graph: -n "Bad_NS": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed`},
		// Before: asked for; no policy can have that name.
		{[]string{"Check Out"}, `retrycap: graph: POLICY "Check Out": not a policy name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.')`},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(append([]string{"graph"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
		if code != ExitBadInput || stderr.String() != tt.want+"\n" || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// gwLog is an access log of observe's testdata, gwDir the directory holding it.
const gwLog, gwDir = "../observe/testdata/gateway/frontend/0.log", "../observe/testdata/gateway"

// TestObserveFlagValues: observe's wrong flag values and combinations, exit 2 naming the flag
// and the value, before any log is read (stdin holds one line that would be read).
func TestObserveFlagValues(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		// Before: an empty DSN was "no --postgres" and stdin was read instead.
		{[]string{"--postgres", ""}, `retrycap: observe: --postgres "": want a libpq connection string or URL (leave the flag out to read logs)`},
		// Before: passed over, the files read.
		{[]string{"--kubeconfig", "/x"}, `retrycap: observe: --kubeconfig /x: reads the pods' logs, needs --from-cluster (files and stdin are read whole)`},
		{[]string{"--context", "prod"}, `retrycap: observe: --context prod: reads the pods' logs, needs --from-cluster (files and stdin are read whole)`},
		// Before: -A won over -n; "" and Bad_NS went to the API server.
		{[]string{"--from-cluster", "-n", "shop", "-A"}, `retrycap: observe: -n and -A exclude each other`},
		{[]string{"--from-cluster", "-n", "Bad_NS"}, `retrycap: observe: -n "Bad_NS": not a namespace name (a DNS-1123 label): only lower-case letters, digits and '-' are allowed`},
		{[]string{"--from-cluster", "-c", ""}, `retrycap: observe: -c "": want a container name (leave the flag out for the default, retrycap-proxy)`},
		// Before: printed a query Loki refuses, exit 0.
		{[]string{"-o", "logql", "--logql-selector", ""}, `retrycap: observe: --logql-selector "": want a LogQL stream selector, {label="value",...}`},
		{[]string{"-o", "logql", "--logql-selector", "app=x"}, `retrycap: observe: --logql-selector "app=x": want a LogQL stream selector, {label="value",...}`},
		// Before: passed over, the logs read as if they were not given.
		{[]string{"--dialect", "clickhouse"}, `retrycap: observe: --dialect clickhouse: only -o sql writes a dialect`},
		{[]string{"--logql-selector", `{app="x"}`}, `retrycap: observe: --logql-selector {app="x"}: only -o logql uses a stream selector`},
		{[]string{"--table", "attempts"}, `retrycap: observe: --table attempts: only -o sql and --postgres read a table`},
		// Before: accepted; one line that long was held whole in memory.
		{[]string{"--max-line", "9999999999999"}, `retrycap: observe: --max-line 9999999999999: must be 1024..1073741824 bytes (1 GiB)`},
		// Before: read twice, every attempt counted twice (observed amplification 6, not 3).
		{[]string{"-f", gwLog, "-f", gwLog}, `retrycap: observe: ` + gwLog + ` given twice: its lines would be counted twice`},
		{[]string{"-f", gwLog, "./" + gwLog}, `retrycap: observe: ./` + gwLog + ` given twice: its lines would be counted twice`},
		{[]string{"-f", gwDir, "-f", gwLog}, `retrycap: observe: ` + gwLog + ` is inside ` + gwDir + `, also given: its lines would be counted twice`},
		// Before: the second "-" read an empty stdin, without a word.
		{[]string{"-f", "-", "-"}, `retrycap: observe: - (stdin) given twice: it is read once`},
		// Before: 0 was the default range, 1h, without a word.
		{[]string{"-o", "logql", "--since", "0"}, `retrycap: observe: --since 0s: -o logql needs a range (leave the flag out for the default, 1h)`},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(append([]string{"observe"}, tt.args...), strings.NewReader(`{"msg":"retrycap-access"}`+"\n"), &stdout, &stderr)
		if code != ExitBadInput || stderr.String() != tt.want+"\n" || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// TestRecursiveWithoutFiles: -R reads the directories given with -f; with -k alone it was
// passed over.
func TestRecursiveWithoutFiles(t *testing.T) {
	for _, cmd := range []string{"analyze", "discover"} {
		var stdout, stderr bytes.Buffer
		code := execute([]string{cmd, "-R", "-k", "../../config/samples"}, strings.NewReader(""), &stdout, &stderr)
		want := "retrycap: " + cmd + ": -R reads the directories given with -f, and no -f is given\n"
		if code != ExitBadInput || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", cmd, code, stdout.String(), stderr.String(), want)
		}
	}
}
