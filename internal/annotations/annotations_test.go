package annotations

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"
)

func TestParseUpstreams(t *testing.T) {
	tests := []struct {
		in      string
		want    []Upstream
		wantErr string
		col     int
	}{
		{in: "", want: nil},
		{in: "   \t ", want: nil},
		{in: "order=3", want: []Upstream{{Name: "order", Attempts: 3}}},
		{in: "order=3, inventory=2*4", want: []Upstream{{Name: "order", Attempts: 3}, {Name: "inventory", Attempts: 2, Calls: 4}}},
		{in: "order", want: []Upstream{{Name: "order"}}},
		{in: "order*5", want: []Upstream{{Name: "order", Calls: 5}}},
		{in: " order = 3 * 2 ,db", want: []Upstream{{Name: "order", Attempts: 3, Calls: 2}, {Name: "db"}}},
		{in: "order.shop=2, api.stripe.com", want: []Upstream{{Name: "order.shop", Attempts: 2}, {Name: "api.stripe.com"}}},
		{in: "order=100*1000", want: []Upstream{{Name: "order", Attempts: 100, Calls: 1000}}},
		{in: "cartservice:7070=3, redis-cart:6379*2, api.stripe.com:443", want: []Upstream{
			{Name: "cartservice", Attempts: 3, Port: 7070}, {Name: "redis-cart", Calls: 2, Port: 6379}, {Name: "api.stripe.com", Port: 443}}},
		{in: "cart : 080 = 2", want: []Upstream{{Name: "cart", Attempts: 2, Port: 80}}},
		{in: "cart:0", wantErr: `token "cart:0" at column 1: port must be an integer 1..65535`, col: 1},
		{in: "cart:65536", wantErr: `token "cart:65536" at column 1: port must be an integer 1..65535`, col: 1},
		{in: "cart:", wantErr: `token "cart:" at column 1: port must be an integer 1..65535`, col: 1},
		{in: ":80", wantErr: `token ":80" at column 1: missing service name`, col: 1},
		{in: "cart:7070, cart:8080", wantErr: `token "cart:8080" at column 12: upstream "cart" is listed twice (first at column 1)`, col: 12},
		{in: "gateway, order=x", wantErr: `token "order=x" at column 10: attempts must be an integer 1..100`, col: 10},
		{in: "order=2, http://payment:8080/api/v1=3", wantErr: `token "http://payment:8080/api/v1=3" at column 10: http:// makes it a URL: write the service or host alone ("payment:8080"), then =ATTEMPTS, /PER-TRY-TIMEOUT, *CALLS`, col: 10},
		{in: "grpc://ledger*3", wantErr: `token "grpc://ledger*3" at column 1: grpc:// makes it a URL: write the service or host alone ("ledger"), then =ATTEMPTS, /PER-TRY-TIMEOUT, *CALLS`, col: 1},
		{in: "order=0", wantErr: `token "order=0" at column 1: attempts must be an integer 1..100`, col: 1},
		{in: "order=101", wantErr: `token "order=101" at column 1: attempts must be an integer 1..100`, col: 1},
		{in: "order=-1", wantErr: `token "order=-1" at column 1: attempts must be an integer 1..100`, col: 1},
		{in: "order=+1", wantErr: `token "order=+1" at column 1: attempts must be an integer 1..100`, col: 1},
		{in: "order*0", wantErr: `token "order*0" at column 1: calls must be an integer 1..1000`, col: 1},
		{in: "order*1001", wantErr: `token "order*1001" at column 1: calls must be an integer 1..1000`, col: 1},
		{in: "order*2=3", wantErr: `token "order*2=3" at column 1: calls must be an integer 1..1000`, col: 1},
		{in: "a,,b", wantErr: `token "" at column 3: empty entry (two commas, or a comma at the start or end)`, col: 3},
		{in: "a, ", wantErr: `token "" at column 3: empty entry (two commas, or a comma at the start or end)`, col: 3},
		{in: "=3", wantErr: `token "=3" at column 1: missing service name`, col: 1},
		{in: "Order=3", wantErr: `token "Order=3" at column 1: "Order" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`, col: 1},
		// A look-alike (Cyrillic а) or an invisible character (a zero-width space) is named, with
		// its code point: the name reads as valid otherwise.
		{in: "p\u0430yment=3", wantErr: "token \"p\u0430yment=3\" at column 1: \"p\u0430yment\" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed, and '\u0430' (U+0430) is not ASCII (a look-alike or an invisible character)", col: 1},
		{in: "pay\u200bment=3", wantErr: `token "pay\u200bment=3" at column 1: "pay\u200bment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed, and '\u200b' (U+200B) is not ASCII (a look-alike or an invisible character)`, col: 1},
		{in: "a..b", wantErr: `token "a..b" at column 1: "a..b" is not a service name, name.namespace or host: two dots in a row`, col: 1},
		{in: "-a", wantErr: `token "-a" at column 1: "-a" is not a service name, name.namespace or host: must start and end with a letter or digit`, col: 1},
		{in: "payment=3/2s", want: []Upstream{{Name: "payment", Attempts: 3, PerTryTimeout: 2 * time.Second}}},
		{in: "payment/1500ms*2, cart:7070 = 2 / 1m30s", want: []Upstream{
			{Name: "payment", Calls: 2, PerTryTimeout: 1500 * time.Millisecond}, {Name: "cart", Attempts: 2, Port: 7070, PerTryTimeout: 90 * time.Second}}},
		{in: "payment=3/1ms, db/1h", want: []Upstream{{Name: "payment", Attempts: 3, PerTryTimeout: time.Millisecond}, {Name: "db", PerTryTimeout: time.Hour}}},
		{in: "payment=3/2", wantErr: `token "payment=3/2" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`, col: 1},
		{in: "a, payment=3/1.5s", wantErr: `token "payment=3/1.5s" at column 4: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`, col: 4},
		{in: "payment=3/-2s", wantErr: `token "payment=3/-2s" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`, col: 1},
		{in: "payment=3/", wantErr: `token "payment=3/" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`, col: 1},
		{in: "payment=3/0s", wantErr: `token "payment=3/0s" at column 1: per-try timeout 0s is out of range 1ms..1h0m0s`, col: 1},
		{in: "payment=3/500us", wantErr: `token "payment=3/500us" at column 1: per-try timeout 500us is out of range 1ms..1h0m0s`, col: 1},
		{in: "payment=3/2h", wantErr: `token "payment=3/2h" at column 1: per-try timeout 2h is out of range 1ms..1h0m0s`, col: 1},
		{in: "payment=3/9999999999h", wantErr: `token "payment=3/9999999999h" at column 1: per-try timeout 9999999999h is out of range 1ms..1h0m0s`, col: 1},
		{in: "payment=3/1µs", wantErr: `token "payment=3/1µs" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s"), and 'µ' (U+00B5) is not ASCII: write microseconds as "us"`, col: 1},
		{in: "payment=3/1e3ms", wantErr: `token "payment=3/1e3ms" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`, col: 1},
		{in: "payment=3/59m60s", want: []Upstream{{Name: "payment", Attempts: 3, PerTryTimeout: time.Hour}}},
		{in: "payment=3/2s/1s", wantErr: `token "payment=3/2s/1s" at column 1: one per-try timeout at most: "/2s/1s" has 2`, col: 1},
		{in: "payment=/2s", wantErr: `token "payment=/2s" at column 1: attempts must be an integer 1..100`, col: 1},
		{in: "payment=3/2 s", wantErr: `token "payment=3/2 s" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`, col: 1},
		{in: "payment=3/1h1h", wantErr: `token "payment=3/1h1h" at column 1: per-try timeout 1h1h is out of range 1ms..1h0m0s`, col: 1},
		{in: " payment = 3 / 2s ", want: []Upstream{{Name: "payment", Attempts: 3, PerTryTimeout: 2 * time.Second}}},
		{in: "payment=3/30m30m", want: []Upstream{{Name: "payment", Attempts: 3, PerTryTimeout: time.Hour}}},
		{in: "payment/2s=3", wantErr: `token "payment/2s=3" at column 1: per-try timeout must be a duration of digits and units ns, us, ms, s, m, h ("500ms", "2s", "1m30s")`, col: 1},
		{in: "payment*2/2s", wantErr: `token "payment*2/2s" at column 1: calls must be an integer 1..1000`, col: 1},
		{in: "order=3, db, order=2", wantErr: `token "order=2" at column 14: upstream "order" is listed twice (first at column 1)`, col: 14},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseUpstreams(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseUpstreams(%q) = %v, want error %q", tt.in, got, tt.wantErr)
				}
				if err.Error() != tt.wantErr {
					t.Fatalf("error = %q, want %q", err, tt.wantErr)
				}
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Column != tt.col {
					t.Fatalf("error %#v: want *ParseError at column %d", err, tt.col)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseUpstreams(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseUpstreams(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

// A port is read with a warning naming the token, its column and the upstream read; the
// value keeps it when formatted (a rewrite or the proxy's flag writes what the user wrote).
func TestParseUpstreamsWarnPort(t *testing.T) {
	ups, warnings, err := ParseUpstreamsWarn("productcatalogservice:3550=2, currencyservice:7000, ads")
	if err != nil {
		t.Fatal(err)
	}
	want := []Warning{
		{Token: "productcatalogservice:3550=2", Column: 1, Message: `read as upstream "productcatalogservice": the graph names services, not ports; port 3550 only picks the Service port whose protocol decides whether a mesh retries the call`},
		{Token: "currencyservice:7000", Column: 31, Message: `read as upstream "currencyservice": the graph names services, not ports; port 7000 only picks the Service port whose protocol decides whether a mesh retries the call`},
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Fatalf("warnings %#v, want %#v", warnings, want)
	}
	if got := warnings[1].String(); got != `token "currencyservice:7000" at column 31: read as upstream "currencyservice": the graph names services, not ports; port 7000 only picks the Service port whose protocol decides whether a mesh retries the call` {
		t.Fatalf("String() = %q", got)
	}
	if got := FormatUpstreams(ups); got != "productcatalogservice:3550=2, currencyservice:7000, ads" {
		t.Fatalf("FormatUpstreams = %q", got)
	}
	// A host outside the cluster: its port is a ServiceEntry's (before: "the Service port",
	// on www.googleapis.com:80, which no Service has); ratings.bookinfo:9080 is a Service's.
	_, w, err := ParseUpstreamsWarn("www.googleapis.com:80, ratings.bookinfo:9080")
	if err != nil || len(w) != 2 ||
		w[0].Message != `read as upstream "www.googleapis.com": the graph names services, not ports; port 80 only picks the port of the ServiceEntry registering the host (Istio) whose protocol decides whether a mesh retries the call` ||
		w[1].Message != `read as upstream "ratings.bookinfo": the graph names services, not ports; port 9080 only picks the Service port whose protocol decides whether a mesh retries the call` {
		t.Fatalf("external host: %#v, %v", w, err)
	}
	if _, w, err := ParseUpstreamsWarn("a=2, b"); w != nil || err != nil {
		t.Fatalf("no port: warnings %v, error %v", w, err)
	}
	if _, w, err := ParseUpstreamsWarn("a:80, a"); w != nil || err == nil {
		t.Fatalf("an error comes without warnings: %v, %v", w, err)
	}
}

func TestFormatUpstreams(t *testing.T) {
	ups := []Upstream{{Name: "order", Attempts: 3}, {Name: "inventory", Attempts: 2, Calls: 4}, {Name: "db"}, {Name: "cache", Calls: 2},
		{Name: "payment", Attempts: 3, PerTryTimeout: 1500 * time.Millisecond, Calls: 2}, {Name: "slow", PerTryTimeout: 90 * time.Second}}
	const want = "order=3, inventory=2*4, db, cache*2, payment=3/1500ms*2, slow/90s"
	if got := FormatUpstreams(ups); got != want {
		t.Fatalf("FormatUpstreams = %q, want %q", got, want)
	}
	back, err := ParseUpstreams(want)
	if err != nil || !reflect.DeepEqual(back, ups) {
		t.Fatalf("round trip: %#v, %v", back, err)
	}
	if got := FormatUpstreams(nil); got != "" {
		t.Fatalf("FormatUpstreams(nil) = %q", got)
	}
}

// FuzzParseUpstreams checks that the parser never panics, that every error is a *ParseError
// whose column points at its token, and that parse(format(x)) == x.
func FuzzParseUpstreams(f *testing.F) {
	for _, s := range []string{
		"", "order=3", "order=3, inventory=2*4", " a = 1 * 2 , b.c , d*7", "a,,b", "order=x",
		"api.stripe.com=2", "a=100*1000", "cart:7070=3*2", "a:0", "a:", ":1", "a:1:2", "a=3,a=2", "é=2", "a=3*", "*", "=", ",", "a.b.svc.cluster.local",
		"payment=3/2s", "p/1m30s*2", "p=2/1.5s", "p/", "p/0ms", "p=1/99999999999999999999h",
		"pay.shop=2, pay.shop.svc=5", "pay.shop.svc.cluster.local, pay.shop", "pay=2, pay.shop=3", "payment=3 /2s",
	} {
		f.Add(s)
	}
	// Every value the docs and samples write, so that what a user copies is in the corpus.
	for _, s := range docExamples(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ups, err := ParseUpstreams(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseUpstreams(%q): error %T is not a *ParseError", s, err)
			}
			if pe.Column < 1 || pe.Column > len(s)+1 {
				t.Fatalf("ParseUpstreams(%q): column %d out of range", s, pe.Column)
			}
			if pe.Token != "" && (pe.Column-1+len(pe.Token) > len(s) || s[pe.Column-1:pe.Column-1+len(pe.Token)] != pe.Token) {
				t.Fatalf("ParseUpstreams(%q): token %q not at column %d", s, pe.Token, pe.Column)
			}
			return
		}
		formatted := FormatUpstreams(ups)
		back, err := ParseUpstreams(formatted)
		if err != nil {
			t.Fatalf("ParseUpstreams(FormatUpstreams(%q) = %q): %v", s, formatted, err)
		}
		if !reflect.DeepEqual(back, ups) {
			t.Fatalf("round trip of %q: %#v != %#v", s, back, ups)
		}
		if again := FormatUpstreams(back); again != formatted {
			t.Fatalf("format not canonical: %q != %q", again, formatted)
		}
	})
}

// docExamples are the retrycap.dev/upstreams values quoted in docs/*.md, README.md and
// config/samples, and the code spans of docs/annotations.md (its grammar's examples).
func docExamples(f *testing.F) []string {
	f.Helper()
	quoted := regexp.MustCompile(`retrycap\.dev/upstreams:? *["']([^"'\n]*)["']`)
	span := regexp.MustCompile("`([^`\n]+)`")
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		f.Fatal(err)
	}
	samples, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	files = append(append(files, "../../README.md"), samples...)
	var out []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range quoted.FindAllSubmatch(data, -1) {
			out = append(out, string(m[1]))
		}
		if filepath.Base(file) == "annotations.md" {
			for _, m := range span.FindAllSubmatch(data, -1) {
				out = append(out, string(m[1]))
			}
		}
	}
	if len(out) < 20 {
		f.Fatalf("%d examples read from the docs: the patterns no longer match them", len(out))
	}
	return out
}
