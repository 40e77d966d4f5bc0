package policy

import (
	"fmt"

	"github.com/retrycap/retrycap/internal/annotations"
)

// Upstream is one entry of --upstreams: a service and the attempts the
// proxy makes per call to it. Calls (fan-out) matters to the graph math,
// not to the proxy, but is kept so the flag accepts the annotation as is.
type Upstream struct {
	Name     string
	Attempts int // 0 = use --default-attempts
	Calls    int
}

// ParseUpstreams parses --upstreams with the workload annotation's own parser
// (internal/annotations), so the flag and the annotation can never disagree on the
// grammar. Errors name the token and its 1-based column.
func ParseUpstreams(s string) ([]Upstream, error) {
	parsed, err := annotations.ParseUpstreams(s)
	if err != nil {
		return nil, fmt.Errorf("upstreams: %w", err)
	}
	out := make([]Upstream, 0, len(parsed))
	for _, u := range parsed {
		calls := int(u.Calls)
		if calls == 0 {
			calls = 1
		}
		out = append(out, Upstream{Name: u.Name, Attempts: int(u.Attempts), Calls: calls})
	}
	return out, nil
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
