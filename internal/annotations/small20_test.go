package annotations

import (
	"slices"
	"testing"
)

// A number or duration written with a look-alike digit (fullwidth "３", Arabic-Indic "٣") or an
// invisible character was refused as "must be an integer" alone, which sends the reader to the
// value's range; the character is now named as it is in a name.
func TestSmall20NonASCIINumbers(t *testing.T) {
	const tail = " is not ASCII (a look-alike or an invisible character)"
	cases := []struct{ in, want string }{
		{"payment=３", `token "payment=３" at column 1: attempts must be an integer 1..100, and '３' (U+FF13)` + tail},
		{"payment=\u0663", `token "payment=٣" at column 1: attempts must be an integer 1..100, and '٣' (U+0663)` + tail},
		{"payment=3\u200b", `token "payment=3\u200b" at column 1: attempts must be an integer 1..100, and '\u200b' (U+200B)` + tail},
		{"payment*２", `token "payment*２" at column 1: calls must be an integer 1..1000, and '２' (U+FF12)` + tail},
		{"payment:８080=2", `token "payment:８080=2" at column 1: port must be an integer 1..65535, and '８' (U+FF18)` + tail},
		{"payment=3/２s", `token "payment=3/２s" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s"), and '２' (U+FF12)` + tail},
		// ASCII typos keep their message as it was.
		{"payment=x", `token "payment=x" at column 1: attempts must be an integer 1..100`},
	}
	for _, c := range cases {
		ups, err := ParseUpstreams(c.in)
		if err == nil {
			t.Errorf("ParseUpstreams(%q) = %+v, want error %q", c.in, ups, c.want)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("ParseUpstreams(%q):\n got %s\nwant %s", c.in, err, c.want)
		}
	}
}

// A bare name and its name.namespace spelling are one service when the workload's namespace is
// known: "payment=2, payment.shop=3" in shop counted 3 tries and dropped the 2 in silence (the
// parser alone cannot tell; api20 left it to the callers, which know the namespace).
func TestSmall20UpstreamsAliasInNamespace(t *testing.T) {
	const tail = ": the graph counts one upstream with the larger attempts and calls; write it once"
	cases := []struct {
		in, ns string
		want   []string
	}{
		{"payment=2, payment.shop=3", "shop", []string{`token "payment.shop=3" at column 12: upstream "payment.shop" is service payment of namespace shop, listed already as "payment" (a name in the workload's namespace) at column 1` + tail}},
		{"payment.shop.svc=3, payment=2", "shop", []string{`token "payment=2" at column 21: upstream "payment" is service payment of namespace shop, the workload's, listed already as "payment.shop.svc" at column 1` + tail}},
		// Another namespace's service, or no namespace known: two services.
		{"payment=2, payment.shop=3", "billing", nil},
		{"payment=2, payment.shop=3", "", nil},
		// A host outside the cluster is not a bare name.
		{"api=2, api.example.com=3", "shop", nil},
	}
	for _, c := range cases {
		_, warnings, err := ParseUpstreamsWarnIn(c.in, c.ns)
		if err != nil {
			t.Fatalf("ParseUpstreamsWarnIn(%q, %q): %v", c.in, c.ns, err)
		}
		var got []string
		for _, w := range warnings {
			got = append(got, w.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ParseUpstreamsWarnIn(%q, %q) warnings:\n got %q\nwant %q", c.in, c.ns, got, c.want)
		}
	}
}
