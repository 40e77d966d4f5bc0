package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/retrycap/retrycap/internal/annotations"
)

// Upstream is one entry of --upstreams: a service and the attempts the
// proxy makes per call to it. Calls (fan-out) matters to the graph math,
// not to the proxy, but is kept so the flag accepts the annotation as is.
type Upstream struct {
	Name     string
	Attempts int // 0 = use --default-attempts
	Calls    int
	// PerTryTimeout bounds each try to this upstream (the grammar's "/TIMEOUT",
	// "payment=3/2s"); 0 = not given: --per-try-timeout applies.
	PerTryTimeout time.Duration
	// Dedup: the upstream deduplicates by Idempotency-Key (--dedup-upstreams), so any key
	// makes a POST or PATCH to it retryable (KeyRetryable).
	Dedup bool
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
		out = append(out, Upstream{Name: u.Name, Attempts: int(u.Attempts), Calls: calls, PerTryTimeout: u.PerTryTimeout})
	}
	return out, nil
}

// MatchHostIn reports whether a request host (without port, any case, a trailing dot allowed)
// names upstream name for a proxy in namespace ns. The rule is the graph's
// (annotations.UpstreamNode, which internal/workload.NormalizeUpstream is): host and name match
// when they are the same node. In namespace shop, upstream "order" is matched by "order",
// "order.shop", "order.shop.svc" and "order.shop.svc.cluster.local", not by "order.other" (a
// service of namespace other, matched by upstream "order.other"); an external host matches
// itself only.
//
// A proxy not told its namespace (ns "") cannot tell its own from another: there, as before
// --namespace, upstream "order" is also matched by "order.<any namespace>[.svc...]".
// It allocates nothing.
func MatchHostIn(host []byte, name, ns string) bool {
	if len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	n := annotations.UpstreamNode(name, ns)
	// A node is a prefix of its name, so a host that does not start with n, ending a label, is
	// not n: the common miss is decided without reading the rest of the host.
	if len(host) < len(n) || !equalFoldASCII(host[:len(n)], n) || (len(host) > len(n) && host[len(n)] != '.') {
		return false
	}
	if len(annotations.UpstreamNode(host, ns)) == len(n) {
		return true
	}
	if ns == "" && len(n) == len(name) && strings.IndexByte(name, '.') < 0 {
		svc, _, ok := annotations.SplitService(host)
		return ok && len(svc) == len(name)
	}
	return false
}

// HostNode is the node a request host (without port, a trailing dot allowed) is in namespace
// ns, by the rule MatchHostIn applies. A proxy with many upstreams computes it once per request
// and compares it with each upstream's UpstreamNode by NodeIs: for ns != "",
// NodeIs(HostNode(host, ns), annotations.UpstreamNode(name, ns)) is MatchHostIn(host, name, ns).
func HostNode(host []byte, ns string) []byte {
	if len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	return annotations.UpstreamNode(host, ns)
}

// NodeIs reports whether a host's node (HostNode) is node, the host read ASCII-case-insensitively.
func NodeIs(hostNode []byte, node string) bool { return equalFoldASCII(hostNode, node) }

// MatchHost is MatchHostIn for a proxy not told its namespace.
func MatchHost(host []byte, name string) bool { return MatchHostIn(host, name, "") }

// MatchIn is the upstream, of a proxy's list in --upstreams order, that a request host names:
// the first whose node is the host's (an exact listing, "order.other" for host "order.other"),
// else, for a proxy not told its namespace, the first the lenient rule of MatchHostIn matches
// ("order" for "order.other"): a listed name is never shadowed by a shorter one listed before
// it. -1: none. forward.Forwarder.Match applies the same rule over its precomputed nodes (the
// upstream-name table runs against both).
func MatchIn[U any](host []byte, ups []U, name func(U) string, ns string) int {
	hn := HostNode(host, ns)
	for i, u := range ups {
		if NodeIs(hn, annotations.UpstreamNode(name(u), ns)) {
			return i
		}
	}
	if ns != "" {
		return -1
	}
	for i, u := range ups {
		if MatchHost(host, name(u)) {
			return i
		}
	}
	return -1
}
