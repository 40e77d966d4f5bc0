package proxy

import (
	"io"
	"testing"
)

// TestFlagErrorsAdversarial: flag values the proxy took without a word. Each is refused
// (exit 2) with the flag, the value and what is accepted, before anything listens.
func TestFlagErrorsAdversarial(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		// Before: the metrics label and the access log's service were "Bad Name" (the injector
		// renders only DNS-1123 labels, as --namespace is checked).
		{[]string{"--service", "Bad Name"}, `invalid value "Bad Name" for --service: not a DNS-1123 label: only lower-case letters, digits and '-' are allowed`},
		{[]string{"--service", "-checkout"}, `invalid value "-checkout" for --service: not a DNS-1123 label: must start and end with a letter or digit`},
		// Before: accepted, the port refused at each dial ("invalid port"), or port 0 dialled.
		{[]string{"--resolve", "order=10.0.0.1:99999"}, `invalid value "order=10.0.0.1:99999" for --resolve: entry "order=10.0.0.1:99999": port 99999: want 1..65535`},
		{[]string{"--resolve", "order=:0"}, `invalid value "order=:0" for --resolve: entry "order=:0": port 0: want 1..65535`},
		{[]string{"--resolve", "order=h:http"}, `invalid value "order=h:http" for --resolve: entry "order=h:http": port http: want 1..65535`},
		// Before: accepted; a body up to it is held in memory per request for replay.
		{[]string{"--max-replay-bytes", "99999999999999"}, `invalid value "99999999999999" for --max-replay-bytes: must be 0..1073741824 (1 GiB: a body up to it is held in memory per request)`},
		// Before: --check passed; the run then failed to bind the second (exit 1).
		{[]string{"--listen", ":15001", "--admin", ":15001"}, `invalid value ":15001" for --admin: the port of --listen (:15001): want another`},
		{[]string{"--listen", "127.0.0.1:15001", "--admin", "0.0.0.0:15001"}, `invalid value "0.0.0.0:15001" for --admin: the port of --listen (127.0.0.1:15001): want another`},
		// Before: the last entry won.
		{[]string{"--resolve", "order=h:1,Order=h:2"}, `invalid value "order=h:1,Order=h:2" for --resolve: entry "Order=h:2": order is resolved twice`},
	} {
		_, err := ParseFlags(c.args, io.Discard)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.args, err, c.want)
		}
	}
	for _, ok := range [][]string{{"--service", "checkout"}, {"--service", "checkout-v2"}, {"--service", ""}, {"--resolve", "order=h:1,payment=[::1]:8080"},
		{"--listen", ":0", "--admin", ":0"}, {"--listen", "127.0.0.1:15001", "--admin", "127.0.0.2:15001"}} {
		if _, err := ParseFlags(ok, io.Discard); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}
