package annotations

import (
	"fmt"
	"strings"
	"testing"
)

// The hostile grammar classes the session-13 red team tried that the parser already refused or
// read as documented, pinned with their exact messages: digits of other scripts, signs, leading
// zeros, fractions and exponents, blanks of other kinds, numbers past int64, an entry split by a
// newline, and 10,000 upstreams in one value.
func TestRedteamUpstreamsGrammar(t *testing.T) {
	const attempts = "attempts must be an integer 1..100"
	cases := []struct{ in, want string }{
		{"order=\uff13", `token "order=３" at column 1: ` + attempts + `, and '３' (U+FF13) is not ASCII (a look-alike or an invisible character)`}, // fullwidth 3
		{"order=\u0663", `token "order=٣" at column 1: ` + attempts + `, and '٣' (U+0663) is not ASCII (a look-alike or an invisible character)`}, // Arabic-Indic 3
		{"order=3.0", `token "order=3.0" at column 1: ` + attempts},
		{"order=1e1", `token "order=1e1" at column 1: ` + attempts},
		{"order=9223372036854775808", `token "order=9223372036854775808" at column 1: ` + attempts},
		{"order=" + strings.Repeat("9", 30), `token "order=` + strings.Repeat("9", 30) + `" at column 1: ` + attempts},
		{"order=3\nbilling=2", `token "order=3\nbilling=2" at column 1: ` + attempts},
		{"order=3\u200b", `token "order=3\u200b" at column 1: ` + attempts + `, and '\u200b' (U+200B) is not ASCII (a look-alike or an invisible character)`},
		{"order=3,", `token "" at column 9: empty entry (two commas, or a comma at the start or end)`},
		{"a=", `token "a=" at column 1: ` + attempts},
		{"a=3/2x", `token "a=3/2x" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`},
		{"a=3/-1s", `token "a=3/-1s" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`},
		{"order=3, order=2", `token "order=2" at column 10: upstream "order" is listed twice (first at column 1)`},
		// Leading zeros are decimal ("03" is 3), NBSP and tab are blanks as strings.TrimSpace reads them.
		{"order=03", ""},
		{"order=\u00a03\t, db =\t2", ""},
	}
	for _, c := range cases {
		ups, err := ParseUpstreams(c.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("ParseUpstreams(%q) = %v, %q; want error %q", c.in, ups, got, c.want)
		}
	}
	if ups, _ := ParseUpstreams("order=03"); len(ups) != 1 || ups[0].Attempts != 3 {
		t.Errorf("order=03: %v, want order with 3 attempts", ups)
	}
	var b strings.Builder
	for i := range 10000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "s%d=%d", i, i%100+1)
	}
	ups, err := ParseUpstreams(b.String())
	if err != nil || len(ups) != 10000 || ups[9999].Name != "s9999" || ups[9999].Attempts != 100 {
		t.Fatalf("10,000 upstreams: %d read, err %v", len(ups), err)
	}
}
