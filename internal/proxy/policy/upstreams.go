package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Upstream is one entry of --upstreams: a service and the attempts the
// proxy makes per call to it. Calls (fan-out) matters to the graph math,
// not to the proxy, but is kept so the flag accepts the annotation as is.
type Upstream struct {
	Name     string
	Attempts int // 0 = use --default-attempts
	Calls    int
}

// ParseUpstreamsLocal parses the annotation grammar NAME[=ATTEMPTS][*CALLS],
// comma separated, e.g. "order=3, inventory=2*4".
//
// It is a local stand-in for the lead-owned parser in internal/annotations;
// replace calls to it with that parser once it exists. Errors name the token
// and its 1-based column, and nothing is ever silently dropped.
func ParseUpstreamsLocal(s string) ([]Upstream, error) {
	var out []Upstream
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	col := 1
	seen := map[string]bool{}
	for _, raw := range strings.Split(s, ",") {
		lead := len(raw) - len(strings.TrimLeft(raw, " \t"))
		tok := strings.TrimSpace(raw)
		tcol := col + lead
		col += len(raw) + 1
		if tok == "" {
			return nil, fmt.Errorf("upstreams %q: empty entry at column %d", s, tcol)
		}
		u := Upstream{Calls: 1}
		name := tok
		if i := strings.IndexByte(name, '*'); i >= 0 {
			c, err := strconv.Atoi(strings.TrimSpace(name[i+1:]))
			if err != nil || c < 1 || c > 1000 {
				return nil, fmt.Errorf("upstreams: token %q at column %d: calls must be 1..1000", tok, tcol)
			}
			u.Calls = c
			name = name[:i]
		}
		if i := strings.IndexByte(name, '='); i >= 0 {
			a, err := strconv.Atoi(strings.TrimSpace(name[i+1:]))
			if err != nil || a < 1 || a > 100 {
				return nil, fmt.Errorf("upstreams: token %q at column %d: attempts must be 1..100", tok, tcol)
			}
			u.Attempts = a
			name = name[:i]
		}
		name = strings.TrimSpace(name)
		if !validHost(name) {
			return nil, fmt.Errorf("upstreams: token %q at column %d: %q is not a service name or host", tok, tcol, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("upstreams: token %q at column %d: %q listed twice", tok, tcol, name)
		}
		seen[name] = true
		u.Name = name
		out = append(out, u)
	}
	return out, nil
}

// validHost accepts dot-separated DNS-1123 labels (a service, name.namespace
// or an external host).
func validHost(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// MatchHost reports whether a request host (without port, any case) names
// upstream name: "order" matches "order", "order.shop" and
// "order.shop.svc.cluster.local"; "order.shop" matches itself and
// "order.shop.svc..."; any other name (an external host) matches exactly.
func MatchHost(host []byte, name string) bool {
	if len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	if len(host) < len(name) || !equalFoldASCII(host[:len(name)], name) {
		return false
	}
	rest := host[len(name):]
	if len(rest) == 0 {
		return true
	}
	if rest[0] != '.' {
		return false
	}
	rest = rest[1:]
	dots := 0
	for _, c := range name {
		if c == '.' {
			dots++
		}
	}
	switch dots {
	case 0: // name: the next label is the namespace, then optionally svc...
		i := indexByte(rest, '.')
		if i < 0 {
			return len(rest) > 0
		}
		return hasPrefixFold(rest[i+1:], "svc")
	case 1: // name.namespace
		return hasPrefixFold(rest, "svc")
	}
	return false
}

func hasPrefixFold(b []byte, p string) bool {
	if len(b) < len(p) || !equalFoldASCII(b[:len(p)], p) {
		return false
	}
	return len(b) == len(p) || b[len(p)] == '.'
}
