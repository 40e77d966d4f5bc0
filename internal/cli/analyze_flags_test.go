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
