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
	} {
		var stdout, stderr bytes.Buffer
		code := execute(append([]string{"discover", "--prometheus-url", "http://127.0.0.1:1"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
		if code != ExitBadInput || stderr.String() != tt.want+"\n" || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 2, stderr %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}
