package telemetry

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseServiceRefsHostile: values that look like URLs but are not, IPv6 literals,
// userinfo, names over a DNS label's 63 characters: each is either a Service of a valid name
// or nothing, never a panic nor a name kubectl would refuse in the annotation.
func TestParseServiceRefsHostile(t *testing.T) {
	long := strings.Repeat("a", 64)
	max := strings.Repeat("a", 63)
	cases := []struct{ in, want string }{
		{"http://", "[]"},
		{"http://:80", "[]"},
		{"http://[::1", "[]"},
		{"http://[::1]:8080", "[]"},
		{"http://[fe80::1%25eth0]:80/x", "[]"},
		{"[fe80::1]:80", "[]"},
		{"fe80::1", "[]"},
		{"::", "[]"},
		{"http://u:p@svc:80", "[{svc  80 http false}]"},
		{"http://u@svc/x", "[{svc  0 http false}]"},
		{"u:p@svc:80", "[]"},
		{"http://" + long + ":80", "[]"},
		{"http://" + max + ":80", "[{" + max + "  80 http false}]"},
		{long + ":80", "[]"},
		{"svc." + long + ".svc:80", "[]"},
		{"svc:0", "[]"},
		{"svc:-1", "[]"},
		{"svc:80:90", "[]"},
		{"http://svc:80:90", "[]"},
		{"http://SVC:80", "[{svc  80 http false}]"},
		{"http://ü:80", "[]"},
		{"http://sv%63:80", "[]"},
		{"svc:80\x00", "[]"},
		{"http://svc:80\n", "[{svc  80 http false}]"},
		{"shop:8080", "[{shop  8080  false}]"}, // a Service named like a namespace is a Service
		{"shop.shop.svc:8080", "[{shop shop 8080  true}]"},
	}
	for _, c := range cases {
		got := ParseServiceRefs(c.in)
		if got == nil {
			got = []ServiceRef{}
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("%q: got %s, want %s", c.in, s, c.want)
		}
	}
}
