package forward

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// requestHeaders does the data path's work on the app's request headers:
// the chain budget from what the app propagated (n, and whether it sent
// baggage), the hop-by-hop headers deleted, and the Idempotency-Key.
func (f *Forwarder) requestHeaders(h *fasthttp.RequestHeader, sc *Scratch) (n int, hadBag bool, key []byte) {
	return f.requestHeadersSeen(h, ScanRequestHeaders(h), sc)
}

// requestHeadersSeen is requestHeaders with the names present known
// (headers.go); SeenAll looks every one up.
func (f *Forwarder) requestHeadersSeen(h *fasthttp.RequestHeader, seen Seen, sc *Scratch) (n int, hadBag bool, key []byte) {
	if f.Cfg.ChainCap > 0 {
		n, hadBag = f.incomingBudget(h, seen, sc)
	}
	// Hop-by-hop headers are addressed to this proxy and go no further
	// (read after the budget: a Connection-nominated budget was meant for it).
	stripHopByHop(h, seen, sc)
	if seen&seenIdempotencyKey != 0 {
		key = h.Peek(headerIdempotencyKey)
	}
	return n, hadBag, key
}

// incomingBudget resolves the chain budget n from every Retrycap-Budget
// header and every baggage header the app sent: the smallest well-formed
// value counts (a repeated header can only lower it, never raise it). When
// a header is repeated, all copies are deleted so that the single value the
// attempt loop sets is the only one a hop below can read. The baggage
// headers are joined into sc.bag (W3C allows splitting baggage over several
// headers); hadBag reports whether there was any.
func (f *Forwarder) incomingBudget(h *fasthttp.RequestHeader, seen Seen, sc *Scratch) (n int, hadBag bool) {
	var budgets, bags [][]byte
	if seen&seenBudget != 0 {
		budgets = h.PeekAll(policy.HeaderBudget)
	}
	n = policy.IncomingBudget(nil, false, nil, false, f.Cfg.ChainCap)
	for _, v := range budgets {
		n = policy.IncomingBudget(v, true, nil, false, n)
	}
	if len(budgets) > 1 {
		h.Del(policy.HeaderBudget)
	}
	if seen&seenBaggage != 0 {
		bags = h.PeekAll(headerBaggage)
	}
	sc.bag = sc.bag[:0]
	for i, v := range bags {
		if i > 0 {
			sc.bag = append(sc.bag, ',')
		}
		sc.bag = append(sc.bag, v...)
	}
	hadBag = len(bags) > 0
	if hadBag {
		n = policy.IncomingBudget(nil, false, sc.bag, true, n)
	}
	if len(bags) > 1 {
		h.Del(headerBaggage)
	}
	return n, hadBag
}

// hopByHop are the headers that describe one connection, not the request
// (RFC 9110 7.6.1, and the list net/http/httputil.ReverseProxy drops).
// Upgrade is not here: an upgrade request is tunnelled before forward.
var hopByHop = [...]struct {
	name string
	bit  Seen
}{
	{"Connection", seenConnection}, {"Proxy-Connection", seenProxyConnection}, {"Keep-Alive", seenKeepAlive},
	{"Proxy-Authorization", seenProxyAuthorization}, {"Proxy-Authenticate", seenProxyAuthenticate},
	{"Te", seenTe}, {"Trailer", seenTrailer},
}

// stripHopByHop deletes the headers the Connection header nominates and the
// fixed hop-by-hop list. The server has already read Connection: close for
// the client side; the upstream connection is the proxy's own business.
func stripHopByHop(h *fasthttp.RequestHeader, seen Seen, sc *Scratch) {
	if seen&seenConnection != 0 {
		deleteNominated(h, sc)
	}
	for _, k := range hopByHop {
		if seen&k.bit != 0 {
			h.Del(k.name)
		}
	}
}

// connectionHeader is what request and response headers share for deleteNominated.
type connectionHeader interface {
	PeekAll(key string) [][]byte
	DelBytes(key []byte)
}

// deleteNominated deletes the headers the Connection header nominates (RFC 9110 7.6.1), other
// than its own close and keep-alive tokens. The list is collected into scratch first, since
// deleting while iterating PeekAll's slices would read freed memory.
func deleteNominated(h connectionHeader, sc *Scratch) {
	sc.conn = sc.conn[:0]
	for _, v := range h.PeekAll("Connection") {
		sc.conn = append(sc.conn, v...)
		sc.conn = append(sc.conn, ',')
	}
	for rest := sc.conn; len(rest) > 0; {
		tok := rest
		if i := bytes.IndexByte(rest, ','); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		tok = bytes.TrimSpace(tok)
		if len(tok) > 0 && !bytes.EqualFold(tok, []byte("close")) && !bytes.EqualFold(tok, []byte("keep-alive")) {
			h.DelBytes(tok)
		}
	}
}

// stripResponseHopByHop does the same for the upstream's response.
func stripResponseHopByHop(h *fasthttp.ResponseHeader, sc *Scratch) {
	stripResponseHopByHopSeen(h, ScanResponseHeaders(h), sc)
}

func stripResponseHopByHopSeen(h *fasthttp.ResponseHeader, seen Seen, sc *Scratch) {
	if seen&seenConnection != 0 {
		deleteNominated(h, sc)
	}
	for _, k := range hopByHop {
		if k.name != "Trailer" && seen&k.bit != 0 { // Trailer announces the trailers the body carries: end to end
			h.Del(k.name)
		}
	}
	if seen&SeenUpgrade != 0 {
		h.Del("Upgrade")
	}
}
