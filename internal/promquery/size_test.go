package promquery

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// tooLarge is the error of an answer over max bytes, the flag's value written as flag.
func tooLarge(max int64, flag string) string {
	return fmt.Sprintf("the answer is over %d bytes, the bound on one answer (--prometheus-max-answer-size %s): refused, not read further (raise --prometheus-max-answer-size if the cluster's answers are this large)", max, flag)
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int64
		want string // the error; "" for none
	}{
		{"67108864", 64 << 20, ""},
		{"64Mi", 64 << 20, ""},
		{"128Mi", 128 << 20, ""},
		{"1Gi", 1 << 30, ""},
		{"1.5Ki", 1536, ""},
		{"500M", 500_000_000, ""},
		{"1k", 1000, ""},
		{"1e3", 1000, ""},
		{"1", 1, ""},
		{"0", 0, `"0": want a size above 0 bytes (64Mi by default)`},
		{"0Mi", 0, `"0Mi": want a size above 0 bytes (64Mi by default)`},
		{"-1", 0, `"-1": want a size above 0 bytes (64Mi by default)`},
		{"-64Mi", 0, `"-64Mi": want a size above 0 bytes (64Mi by default)`},
		{"abc", 0, `"abc": not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)`},
		{"64MB", 0, `"64MB": not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)`},
		{"1K", 0, `"1K": not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)`},
		{"", 0, `"": not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)`},
		{"0.5", 0, `"0.5": not a whole number of bytes`},
		{"1m", 0, `"1m": not a whole number of bytes`},
		{"8Ei", 0, `"8Ei": over the largest size, 9223372036854775806 bytes`},
		{"9Ei", 0, `"9Ei": over the largest size, 9223372036854775806 bytes`},
	} {
		n, err := ParseSize(tc.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if n != tc.n || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %q; want %d, %q", tc.in, n, got, tc.n, tc.want)
		}
	}
	for n, want := range map[int64]string{64 << 20: "64Mi", 1000: "1000", 1536: "1536", 1 << 30: "1Gi", 1023: "1023"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestSizeFlag: the value as the manager's flag package and the CLI's pflag read it: the error
// names the flag and the value once, and the default shows in the help as 64Mi.
func TestSizeFlag(t *testing.T) {
	for _, tc := range []struct{ arg, goFlag, pFlag string }{
		{"0", `invalid value "0" for flag -prometheus-max-answer-size: want a size above 0 bytes (64Mi by default)`,
			`invalid argument "0" for "--prometheus-max-answer-size" flag: want a size above 0 bytes (64Mi by default)`},
		{"-5Mi", `invalid value "-5Mi" for flag -prometheus-max-answer-size: want a size above 0 bytes (64Mi by default)`,
			`invalid argument "-5Mi" for "--prometheus-max-answer-size" flag: want a size above 0 bytes (64Mi by default)`},
		{"lots", `invalid value "lots" for flag -prometheus-max-answer-size: not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)`,
			`invalid argument "lots" for "--prometheus-max-answer-size" flag: not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)`},
	} {
		size := Size(DefaultMaxAnswerBytes)
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(&size, "prometheus-max-answer-size", "")
		if err := fs.Parse([]string{"--prometheus-max-answer-size=" + tc.arg}); err == nil || err.Error() != tc.goFlag {
			t.Errorf("flag: got  %v\nwant %s", err, tc.goFlag)
		}
		ps := pflag.NewFlagSet("discover", pflag.ContinueOnError)
		ps.SetOutput(io.Discard)
		ps.Var(&size, "prometheus-max-answer-size", "")
		if err := ps.Parse([]string{"--prometheus-max-answer-size=" + tc.arg}); err == nil || err.Error() != tc.pFlag {
			t.Errorf("pflag: got  %v\nwant %s", err, tc.pFlag)
		}
		if size != DefaultMaxAnswerBytes {
			t.Errorf("a refused value changed the size to %d", size)
		}
	}
	size := Size(DefaultMaxAnswerBytes)
	ps := pflag.NewFlagSet("discover", pflag.ContinueOnError)
	ps.Var(&size, "prometheus-max-answer-size", "bound of one answer")
	if got, want := ps.FlagUsages(), "      --prometheus-max-answer-size quantity   bound of one answer (default 64Mi)\n"; got != want {
		t.Errorf("help: got %q, want %q", got, want)
	}
	if err := ps.Parse([]string{"--prometheus-max-answer-size", "128Mi"}); err != nil || size != 128<<20 {
		t.Errorf("128Mi: %v, %d", err, size)
	}
	if _, err := New(Options{URL: "http://127.0.0.1:9090", MaxAnswerBytes: -1}); err == nil || err.Error() != "--prometheus-max-answer-size -1: want a size above 0 bytes" {
		t.Errorf("New with -1: %v", err)
	}
}

// TestMaxAnswerSizeEdge: an answer of exactly the bound is read; one byte over it is refused
// naming the flag, whether the answer says its length (Content-Length, refused before reading)
// or not (chunked, refused at the bound).
func TestMaxAnswerSizeEdge(t *testing.T) {
	body := vector([2]string{`{"namespace":"shop","service":"order","upstream":"payment"}`, "42"})
	size := int64(len(body))
	for _, chunked := range []bool{false, true} {
		h := func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if chunked {
				w.(http.Flusher).Flush() // headers out without a Content-Length
			} else {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			io.WriteString(w, body)
		}
		c, _ := hostile(t, h, Options{MaxAnswerBytes: size})
		v, err := c.query(context.Background(), testQ, time.Now())
		if err != nil || len(v) != 1 || v[0].Value != 42 {
			t.Fatalf("chunked %v: an answer of exactly %d bytes at a bound of %d: %v, %v", chunked, size, size, v, err)
		}
		c, url := hostile(t, h, Options{MaxAnswerBytes: size - 1})
		_, err = c.query(context.Background(), testQ, time.Now())
		want := "query sum(up): " + tooLarge(size-1, strconv.FormatInt(size-1, 10))
		if !chunked {
			want = fmt.Sprintf("query sum(up): HTTP 200 from %s/api/v1/query: Content-Length %d: %s", url, size, tooLarge(size-1, strconv.FormatInt(size-1, 10)))
		}
		if err == nil || err.Error() != want {
			t.Fatalf("chunked %v, bound %d, answer %d bytes:\ngot  %v\nwant %s", chunked, size-1, size, err, want)
		}
	}
}
