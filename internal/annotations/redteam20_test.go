package annotations

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The session-20 red team's typos, each pinned with its exact message: none is read silently as
// something else.
func TestRedteam20UpstreamsTypos(t *testing.T) {
	const (
		attempts = "attempts must be an integer 1..100"
		timeout  = `per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`
	)
	long := "p" + strings.Repeat("a", 63)
	cases := []struct{ in, want string }{
		{"payment=3/2ss", `token "payment=3/2ss" at column 1: ` + timeout},
		{"payment=3/2 s", `token "payment=3/2 s" at column 1: ` + timeout},
		{"payment=3/2S", `token "payment=3/2S" at column 1: ` + timeout},
		{"payment=3/PT5S", `token "payment=3/PT5S" at column 1: ` + timeout},
		{"payment=3/1µs", `token "payment=3/1µs" at column 1: ` + timeout + `, and 'µ' (U+00B5) is not ASCII: write microseconds as "us"`},
		{"payment=3/1h1h", `token "payment=3/1h1h" at column 1: per-try timeout 1h1h is out of range 1ms..1h0m0s`},
		{"payment==3", `token "payment==3" at column 1: ` + attempts},
		{"payment=3=3", `token "payment=3=3" at column 1: ` + attempts},
		{"payment=3;order=2", `token "payment=3;order=2" at column 1: ` + attempts},
		{"payment=3 order=2", `token "payment=3 order=2" at column 1: ` + attempts},
		{"payment=3,", `token "" at column 11: empty entry (two commas, or a comma at the start or end)`},
		{",payment=3", `token "" at column 1: empty entry (two commas, or a comma at the start or end)`},
		{"payment=3, payment=2", `token "payment=2" at column 12: upstream "payment" is listed twice (first at column 1)`},
		{"Payment=3", `token "Payment=3" at column 1: "Payment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`},
		{long + "=2", `token "` + long + `=2" at column 1: "` + long + `" is not a service name, name.namespace or host: label longer than 63 characters`},
		{"pаyment=3", `token "pаyment=3" at column 1: "pаyment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed, and 'а' (U+0430) is not ASCII (a look-alike or an invisible character)`},
		{"bücher.de=2", `token "bücher.de=2" at column 1: "bücher.de" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed, and 'ü' (U+00FC) is not ASCII (a look-alike or an invisible character)`},
		{"payment_v2=2", `token "payment_v2=2" at column 1: "payment_v2" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`},
		{"payment:80:90", `token "payment:80:90" at column 1: "payment:80" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`},
		{"[::1]:80=2", `token "[::1]:80=2" at column 1: "[::1]" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`},
		// A stray dot is said where it is (before: "empty label").
		{"payment.=3", `token "payment.=3" at column 1: "payment." is not a service name, name.namespace or host: a trailing dot (DNS's absolute form) is not written here: "payment"`},
		{"api.example.com.=2", `token "api.example.com.=2" at column 1: "api.example.com." is not a service name, name.namespace or host: a trailing dot (DNS's absolute form) is not written here: "api.example.com"`},
		{".payment=3", `token ".payment=3" at column 1: ".payment" is not a service name, name.namespace or host: it starts with a dot`},
		{"payment..shop=3", `token "payment..shop=3" at column 1: "payment..shop" is not a service name, name.namespace or host: two dots in a row`},
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

	// Accepted as documented: blanks around the separators, and names that are one service
	// only in some namespace (the parser does not know the workload's).
	for in, want := range map[string][]Upstream{
		"payment = 3 / 2s * 2":               {{Name: "payment", Attempts: 3, PerTryTimeout: 2 * time.Second, Calls: 2}},
		"payment=3 /2s":                      {{Name: "payment", Attempts: 3, PerTryTimeout: 2 * time.Second}},
		"xn--bcher-kva.de=2":                 {{Name: "xn--bcher-kva.de", Attempts: 2}},
		"payment.shop=2, payment.billing=3":  {{Name: "payment.shop", Attempts: 2}, {Name: "payment.billing", Attempts: 3}},
		"payment.shop=2, payment.shop.svc=5": {{Name: "payment.shop", Attempts: 2}, {Name: "payment.shop.svc", Attempts: 5}},
		"payment=2, payment.shop=3":          {{Name: "payment", Attempts: 2}, {Name: "payment.shop", Attempts: 3}},
		"api.example.com=2, api.example.net": {{Name: "api.example.com", Attempts: 2}, {Name: "api.example.net"}},
	} {
		got, err := ParseUpstreams(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseUpstreams(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

// One service under two in-cluster spellings was accepted in silence: the graph reads one node
// with the larger values, so "pay.shop=2, pay.shop.svc=5" counted 5 tries and the 2 written
// first was dropped without a word. It stays accepted (stored workloads carry it, and the
// larger is the worst case), with a warning naming both spellings and columns.
func TestUpstreamsAliasWarning(t *testing.T) {
	const tail = ": the graph counts one upstream with the larger attempts and calls; write it once"
	cases := []struct {
		in   string
		want []string
	}{
		{"payment.shop=2, payment.shop.svc=5", []string{`token "payment.shop.svc=5" at column 17: upstream "payment.shop.svc" is service payment of namespace shop, listed already as "payment.shop" at column 1` + tail}},
		{"payment.shop.svc.cluster.local, order, payment.shop=3, payment.shop.svc", []string{
			`token "payment.shop=3" at column 40: upstream "payment.shop" is service payment of namespace shop, listed already as "payment.shop.svc.cluster.local" at column 1` + tail,
			`token "payment.shop.svc" at column 56: upstream "payment.shop.svc" is service payment of namespace shop, listed already as "payment.shop.svc.cluster.local" at column 1` + tail,
		}},
		{"payment.shop=2, payment.billing.svc=3, payment=4", nil},
	}
	for _, c := range cases {
		_, warnings, err := ParseUpstreamsWarn(c.in)
		if err != nil {
			t.Fatalf("ParseUpstreamsWarn(%q): %v", c.in, err)
		}
		var got []string
		for _, w := range warnings {
			got = append(got, w.String())
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseUpstreamsWarn(%q) warnings:\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
