package annotations

// The upstream-name rule, one for the graph (internal/workload.NormalizeUpstream) and for the
// proxy's host matching (internal/proxy/policy.MatchHostIn). In namespace ns:
//
//   - "x", "x.ns", "x.ns.svc" and "x.ns.svc.cluster.local" are service x of ns: node "x";
//   - "x.other", "x.other.svc" and "x.other.svc.cluster.local" are service x of namespace
//     other, a different service: node "x.other";
//   - any other name ("api.example.com", "x.y.z") is an external host: node itself.
//
// The labels of name are read ASCII-case-insensitively (hosts are; the annotation's names are
// lower case anyway); ns is a namespace, lower case. The functions are generic over string and []byte and allocate nothing, so the
// proxy runs them on request bytes.

// SplitService splits the in-cluster forms of a service name: "x.ns", "x.ns.svc" and
// "x.ns.svc.cluster.local" give (x, ns, true). A single label, or any other name, gives false.
func SplitService[S ~string | ~[]byte](name S) (svc, ns S, ok bool) {
	var dot [4]int // the first four dots
	n := 0
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			if n == len(dot) {
				return svc, ns, false // five or more dots
			}
			dot[n] = i
			n++
		}
	}
	switch {
	case n == 1:
		return name[:dot[0]], name[dot[0]+1:], true
	case n == 2 && foldEq(name[dot[1]+1:], "svc"),
		n == 4 && foldEq(name[dot[1]+1:], "svc.cluster.local"):
		return name[:dot[0]], name[dot[0]+1 : dot[1]], true
	}
	return svc, ns, false
}

// UpstreamNode is the node that an upstream name, or a request host, is in the graph of
// namespace ns (see the rule above), ns in lower case: always a prefix of name.
func UpstreamNode[S ~string | ~[]byte](name S, ns string) S {
	svc, sns, ok := SplitService(name)
	if !ok {
		return name
	}
	if foldEq(sns, ns) {
		return svc
	}
	return name[:len(svc)+1+len(sns)]
}

// foldEq reports whether a, ASCII case folded, is b, which is lower case.
func foldEq[S ~string | ~[]byte](a S, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != b[i] {
			return false
		}
	}
	return true
}
