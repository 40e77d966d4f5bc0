package workload

import (
	"slices"
	"testing"
)

// The gate and analyze warn of one service under a bare name and its name.namespace spelling,
// read in the workload's namespace (before: merged in silence).
func TestSmall20UpstreamsWarningsInNamespace(t *testing.T) {
	got := UpstreamsWarnings(deploy("shop", "checkout", "payment=2, payment.shop=3", nil))
	want := []string{`Deployment shop/checkout: annotation retrycap.dev/upstreams: token "payment.shop=3" at column 12: upstream "payment.shop" is service payment of namespace shop, listed already as "payment" (a name in the workload's namespace) at column 1: the graph counts one upstream with the larger attempts and calls; write it once`}
	if !slices.Equal(got, want) {
		t.Errorf("UpstreamsWarnings:\n got %q\nwant %q", got, want)
	}
	if got := UpstreamsWarnings(deploy("billing", "checkout", "payment=2, payment.shop=3", nil)); len(got) != 0 {
		t.Errorf("in billing: %q, want none (two services)", got)
	}
}
