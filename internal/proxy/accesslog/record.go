package accesslog

// The byte fields a record carries, and the most of each it keeps: longer values are cut (a
// path at 256 bytes, an authority at 128, ...), which keeps a slot fixed-size and the ring
// preallocated. The values are packed one after the other in the record's data area, so a
// record of short values spans a few cache lines: the background writer, on another core,
// reads only those.
const (
	fMethod = iota
	fAuthority
	fPath
	fTrace
	fKey
	fRequestID
	fStormOp
	numFields
)

var fieldMax = [numFields]int{fMethod: 16, fAuthority: 128, fPath: 256, fTrace: 32, fKey: 96, fRequestID: 96, fStormOp: 48}

// dataSize holds every field at its longest.
const dataSize = 16 + 128 + 256 + 32 + 96 + 96 + 48

var slash = []byte("/")

// Who ended an answer's body before its end, after its head went to the client: Record.Cut,
// the line's "cut", the label by of retrycap_proxy_responses_cut_total. Both protocols' (the
// HTTP/1.1 engines through forward.StreamEnd, the h2 relay's streams).
const (
	// CutUpstream: the upstream closed or reset its connection (HTTP/2: reset the stream, or
	// its connection ended or went away under it), stalled past the body's idle timeout, or
	// broke the body's framing or the protocol.
	CutUpstream = "upstream"
	// CutClient: the client went away (reset its connection or, on HTTP/2, the stream; the
	// proxy's writes to it failed; it broke the protocol).
	CutClient = "client"
	// CutProxy: the proxy ended it: it could not stream it (descriptors ran out), a drain ran
	// out of time, a client that stopped reading hit the write timeout or did not answer the
	// keepalive PING, a gRPC call's deadline passed, or the answer's header list was larger
	// than the client accepts.
	CutProxy = "proxy"
)

// Record is one attempt. Strings must be long-lived (the upstream's name, a reason's String):
// they are stored, not copied. Byte values are copied with the Set methods.
type Record struct {
	TimeNanos     int64 // when the attempt started, Unix nanoseconds
	DurationNanos int64
	Upstream      string
	Attempt       int
	BudgetIn      int // -1: no chain budget (--chain-cap=0)
	BudgetOut     int
	Status        int // 0: no response
	GRPCStatus    int // -1: none
	Exhausted     string
	Error         string
	// Cut is who ended a streamed answer body before its end, after its head went to the client
	// ("upstream", "client", "proxy"; "" when it ended whole or did not stream), and BodyBytes how many
	// bytes of it the proxy had read from the upstream by then. Set only on a line written when
	// the body ended (Writer.CommitRecord: the shared ring; a loop's ring carries neither).
	Cut       string
	BodyBytes int64

	off, n [numFields]uint16 // field f is data[off[f] : off[f]+n[f]]
	used   uint16
	data   [dataSize]byte
}

// set copies a field's value (cut at its maximum) after the ones already set. Each field is
// set at most once per record (the area holds every field once at its longest).
func (r *Record) set(f int, b []byte) {
	if len(b) > fieldMax[f] {
		b = b[:fieldMax[f]]
	}
	k := copy(r.data[r.used:], b)
	r.off[f], r.n[f] = r.used, uint16(k)
	r.used += uint16(k)
}

// get is a field's value.
func (r *Record) get(f int) []byte { return r.data[r.off[f] : r.off[f]+r.n[f]] }

// SetMethod copies the method.
func (r *Record) SetMethod(b []byte) { r.set(fMethod, b) }

// SetAuthority copies the host the request named.
func (r *Record) SetAuthority(b []byte) { r.set(fAuthority, b) }

// SetPath copies the path of a request URI, absolute-form or origin-form, without the query
// or the fragment.
func (r *Record) SetPath(uri []byte) { r.set(fPath, PathOf(uri)) }

// SetTraceparent copies the trace id of a W3C traceparent (00-TRACEID-SPANID-FLAGS); nothing
// when it is not one.
func (r *Record) SetTraceparent(tp []byte) {
	if len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
		r.set(fTrace, tp[3:35])
	}
}

// SetKey copies the Idempotency-Key.
func (r *Record) SetKey(b []byte) { r.set(fKey, b) }

// SetRequestID copies the X-Request-Id.
func (r *Record) SetRequestID(b []byte) { r.set(fRequestID, b) }

// SetStormOp copies the value of the baggage member storm-op, if the baggage has one.
func (r *Record) SetStormOp(baggage []byte) { r.set(fStormOp, BaggageMember(baggage, "storm-op")) }

// reset clears what the Set methods set.
func (r *Record) reset() {
	r.n = [numFields]uint16{}
	r.used = 0
	r.Exhausted, r.Error, r.Cut, r.BodyBytes = "", "", "", 0
}

// PathOf is the path of a request URI: "http://order/buy?x=1" -> "/buy", "/buy?x" -> "/buy",
// "*" -> "*".
func PathOf(uri []byte) []byte {
	if i := indexString(uri, "://"); i >= 0 {
		rest := uri[i+3:]
		j := 0
		for j < len(rest) && rest[j] != '/' && rest[j] != '?' && rest[j] != '#' {
			j++
		}
		uri = rest[j:]
		if len(uri) == 0 || uri[0] != '/' {
			return slash // "http://order" or "http://order?x": the root
		}
	}
	for i, c := range uri {
		if c == '?' || c == '#' {
			return uri[:i]
		}
	}
	return uri
}

// BaggageMember is the value of a W3C baggage list's member name ("" if none), without its
// properties.
func BaggageMember(bag []byte, name string) []byte {
	for len(bag) > 0 {
		var m []byte
		if i := indexByte(bag, ','); i >= 0 {
			m, bag = bag[:i], bag[i+1:]
		} else {
			m, bag = bag, nil
		}
		m = trimSpace(m)
		if len(m) > len(name) && string(m[:len(name)]) == name {
			v := trimSpace(m[len(name):])
			if len(v) > 0 && v[0] == '=' {
				v = v[1:]
				if i := indexByte(v, ';'); i >= 0 {
					v = v[:i]
				}
				return trimSpace(v)
			}
		}
	}
	return nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func indexString(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
