package observe

import (
	"bytes"
	"strings"
	"testing"
)

// TestTableQuotesHostileValues: keys and service names are the client's headers; the table
// writes one that is not printable UTF-8 quoted, so a newline cannot forge a row, a tab shift
// a column, an escape sequence reach the terminal, nor two keys that differ in invalid bytes
// print alike (before: written raw).
func TestTableQuotesHostileValues(t *testing.T) {
	var in strings.Builder
	for _, k := range []string{`a\n31\t0\t0 FORGED`, `k\u001b[2J`, "k\xff", "k\xfe", "plain key", "caf\u00e9"} {
		for range 2 {
			in.WriteString(rline(okTime, `,"idempotency_key":"`+k+`"`) + "\n")
		}
	}
	in.WriteString(`{"log":"retrycap-access","time":"` + okTime + `","service":"w` + `\u0007eb","upstream":"or\tder","attempt":1,"status":503,"idempotency_key":"svc"}` + "\n")
	in.WriteString(`{"log":"retrycap-access","time":"` + okTime + `","service":"w` + `\u0007eb","upstream":"or\tder","attempt":2,"status":503,"idempotency_key":"svc"}` + "\n")
	g := NewGrouper()
	if _, err := g.Consume(strings.NewReader(in.String()), Source{Name: "f"}, DefaultMaxLine); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := g.Report(1, 0).WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1+7+1 { // header, 7 keys, summary
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	for _, want := range []string{`"a\n31\t0\t0 FORGED"`, `"k\x1b[2J"`, `"k\xff"`, `"k\xfe"`, "plain key ", "café ", `"w\aeb" > "or\tder" 2`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %s:\n%s", want, out.String())
		}
	}
	if bytes.ContainsAny(out.Bytes(), "\x1b\xff\xfe\a\t") {
		t.Errorf("raw control or invalid bytes in the table:\n%q", out.String())
	}
}
