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
	if len(h.PeekTrailerKeys()) > 0 {
		// Trailers never count as headers: not for the budget, the key,
		// nor upstream (fasthttp looks names up in both sections).
		removeRequestFields(h, func([]byte, *Scratch) bool { return false }, sc)
	}
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

// keyFieldsDiffer reports whether the request carries Idempotency-Key
// fields of different values (first: the first one's). PeekAll, not All:
// All collects the cookies, after which fasthttp writes the Cookie field
// re-encoded; PeekAll reuses the header's buffer (no allocation).
func keyFieldsDiffer(h *fasthttp.RequestHeader, first []byte) bool {
	for _, v := range h.PeekAll(headerIdempotencyKey) {
		if !bytes.Equal(v, first) {
			return true
		}
	}
	return false
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
	dupBudget := len(budgets) > 1
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
	if dupBudget || len(bags) > 1 {
		// Deleted in place (fields.go): the attempt sets one of each.
		removeRequestFields(h, func(k []byte, _ *Scratch) bool {
			return (dupBudget && bytes.EqualFold(k, keyBudget)) || (len(bags) > 1 && bytes.EqualFold(k, keyBaggage))
		}, sc)
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

// hopMask is the bits of hopByHop.
const hopMask = seenConnection | seenProxyConnection | seenKeepAlive | seenProxyAuthorization | seenProxyAuthenticate | seenTe | seenTrailer

// stripHopByHop deletes the headers the Connection header nominates and the
// fixed hop-by-hop list, and the trailer fields, the others staying where
// they are (fields.go). The server has already read Connection: close for
// the client side; the upstream connection is the proxy's own business.
func stripHopByHop(h *fasthttp.RequestHeader, seen Seen, sc *Scratch) {
	if seen&hopMask == 0 && len(h.PeekTrailerKeys()) == 0 {
		return
	}
	nominated(h, seen, sc)
	removeRequestFields(h, dropHop, sc)
}

// StripUpgradeRequest prepares an upgrade request's head (Connection,
// Upgrade and what Connection nominates go on: they are the upgrade):
// the proxy's own fields and the trailers are deleted, the rest stays in
// place.
func StripUpgradeRequest(h *fasthttp.RequestHeader, sc *Scratch) {
	removeRequestFields(h, func(k []byte, _ *Scratch) bool {
		return !bytes.EqualFold(k, []byte("Connection")) && isHop(k)
	}, sc)
}

// nominated collects the tokens of the Connection header into sc.conn.
func nominated(h interface{ PeekAll(key string) [][]byte }, seen Seen, sc *Scratch) {
	sc.conn = sc.conn[:0]
	if seen&seenConnection == 0 {
		return
	}
	for _, v := range h.PeekAll("Connection") {
		sc.conn = append(sc.conn, v...)
		sc.conn = append(sc.conn, ',')
	}
}

func isHop(k []byte) bool {
	for _, x := range hopByHop {
		if len(k) == len(x.name) && bytes.EqualFold(k, []byte(x.name)) {
			return true
		}
	}
	return false
}

// isNominated reports whether the Connection header (sc.conn) names k,
// other than by its own close and keep-alive tokens.
func isNominated(k []byte, sc *Scratch) bool {
	for rest := sc.conn; len(rest) > 0; {
		tok := rest
		if i := bytes.IndexByte(rest, ','); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		tok = bytes.TrimSpace(tok)
		if len(tok) > 0 && bytes.EqualFold(tok, k) && !bytes.EqualFold(tok, []byte("close")) && !bytes.EqualFold(tok, []byte("keep-alive")) {
			return true
		}
	}
	return false
}

func dropHop(k []byte, sc *Scratch) bool { return isHop(k) || isNominated(k, sc) }

// dropResponseHop: Trailer announces the trailers the body carries (end to
// end); Upgrade goes (an upgrade is answered before forward).
func dropResponseHop(k []byte, sc *Scratch) bool {
	if bytes.EqualFold(k, []byte("Trailer")) {
		return false
	}
	return isHop(k) || bytes.EqualFold(k, []byte("Upgrade")) || isNominated(k, sc)
}

// stripResponseHopByHop does the same for the upstream's response.
func stripResponseHopByHop(h *fasthttp.ResponseHeader, sc *Scratch) {
	stripResponseHopByHopSeen(h, ScanResponseHeaders(h), sc)
}

func stripResponseHopByHopSeen(h *fasthttp.ResponseHeader, seen Seen, sc *Scratch) {
	hops := seen & (hopMask&^seenTrailer | SeenUpgrade)
	if hops == 0 {
		return
	}
	if hops == seenConnection && connectionOnlyAtEnd(h) {
		// The common answer (nginx, Node.js, most servers): its only
		// hop-by-hop field is a Connection: keep-alive (or close), last.
		// Del moves nothing into its place then; the snapshot and rebuild
		// below cost ~4 % of the loop's CPU per request.
		h.Del(hConnection)
		return
	}
	nominated(h, seen, sc)
	removeResponseFields(h, dropResponseHop, sc)
}

const hConnection = "Connection"

// connectionOnlyAtEnd reports whether deleting h's Connection fields with
// fasthttp's Del keeps every other field in its place and deletes all that
// dropResponseHop would: each field of that name (spelt exactly so, as
// Del's normalised key matches it) comes after every field of another name
// in fasthttp's list, and names no field (only close and keep-alive tokens).
func connectionOnlyAtEnd(h *fasthttp.ResponseHeader) bool {
	conn := false
	for k, v := range h.All() {
		if len(k) != len(hConnection) || !bytes.EqualFold(k, []byte(hConnection)) {
			if conn {
				return false // a field after a Connection: Del would move it
			}
			continue
		}
		if string(k) != hConnection || !onlyConnectionTokens(v) {
			return false
		}
		conn = true
	}
	return true
}

// onlyConnectionTokens: the Connection value v is a list of close and
// keep-alive tokens (and empty elements) only.
func onlyConnectionTokens(v []byte) bool {
	for rest := v; len(rest) > 0; {
		tok := rest
		if i := bytes.IndexByte(rest, ','); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		tok = trimSpace(tok)
		if len(tok) > 0 && !bytes.EqualFold(tok, []byte("close")) && !bytes.EqualFold(tok, []byte("keep-alive")) {
			return false
		}
	}
	return true
}

// StripResponse cleans an upstream's answer as the exchange does (the
// hop-by-hop fields deleted, no default Content-Type, the connection's
// close flag the proxy's business), for answers passed on outside an
// exchange (a refused upgrade).
func StripResponse(h *fasthttp.ResponseHeader, sc *Scratch) {
	h.SetNoDefaultContentType(true)
	stripResponseHopByHop(h, sc)
	h.ResetConnectionClose()
	if !h.IsHTTP11() {
		h.SetProtocol(http11) // the proxy's own version, as Exchange.finish
	}
}

// PrepareUpgrade readies an upgrade request's head: the chain budget
// resolved and clamped as for any call (the tunnel is one attempt; it
// carries the whole budget n), the proxy's own fields and the trailers
// removed, the rest in place.
func (f *Forwarder) PrepareUpgrade(h *fasthttp.RequestHeader, sc *Scratch) {
	h.SetNoDefaultContentType(true)
	StripUpgradeRequest(h, sc)
	if f.Cfg.ChainCap > 0 {
		n, hadBag := f.incomingBudget(h, ScanRequestHeaders(h), sc)
		sc.num = policy.AppendInt(sc.num[:0], n)
		h.SetCanonical(keyBudget, sc.num)
		if hadBag {
			sc.out = policy.AppendBaggage(sc.out[:0], sc.bag, n)
			h.SetCanonical(keyBaggage, sc.out)
		}
	}
}

// H2CUpgrade reports whether the request asks to switch to h2c: an Upgrade
// field one of whose protocols is h2c (RFC 9113 deprecates that upgrade;
// Go's and HAProxy's servers ignore it). The proxy never opens a tunnel
// for it: the request is served as HTTP/1.1, with the policy
// (DropH2CUpgrade). It is not an upgrade to any protocol then, even if
// the field names others too: an upgrade is one tunnel, and the client
// asked first for one the proxy refuses.
func H2CUpgrade(h *fasthttp.RequestHeader) bool {
	v := h.Peek("Upgrade")
	for len(v) > 0 {
		tok := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if bytes.EqualFold(trimSpace(tok), []byte("h2c")) {
			return true
		}
	}
	return false
}

// DropH2CUpgrade turns an h2c upgrade request into a plain HTTP/1.1 one:
// its Upgrade and HTTP2-Settings fields are deleted in place (the
// Connection field and what it names go as for any request, stripped by the
// exchange), so no upstream sees an upgrade it could accept, and the
// request is forwarded with the policy like any other.
func DropH2CUpgrade(h *fasthttp.RequestHeader, sc *Scratch) {
	removeRequestFields(h, func(k []byte, _ *Scratch) bool {
		return bytes.EqualFold(k, []byte("Upgrade")) || bytes.EqualFold(k, []byte("HTTP2-Settings"))
	}, sc)
}
