package accesslog

// Field sizes: longer values are cut (a path at 256 bytes, an authority at 128, ...), which
// keeps a slot fixed-size and the ring preallocated.
const (
	maxMethod    = 16
	maxAuthority = 128
	maxPath      = 256
	maxTraceID   = 32
	maxKey       = 96
	maxRequestID = 96
	maxStormOp   = 48
)

var slash = []byte("/")

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

	method    [maxMethod]byte
	methodN   uint8
	authority [maxAuthority]byte
	authN     uint8
	path      [maxPath]byte
	pathN     uint16
	trace     [maxTraceID]byte
	traceN    uint8
	key       [maxKey]byte
	keyN      uint8
	reqID     [maxRequestID]byte
	reqIDN    uint8
	stormOp   [maxStormOp]byte
	stormOpN  uint8
}

// SetMethod copies the method.
func (r *Record) SetMethod(b []byte) { r.methodN = uint8(copy(r.method[:], b)) }

// SetAuthority copies the host the request named.
func (r *Record) SetAuthority(b []byte) { r.authN = uint8(copy(r.authority[:], b)) }

// SetPath copies the path of a request URI, absolute-form or origin-form, without the query
// or the fragment.
func (r *Record) SetPath(uri []byte) { r.pathN = uint16(copy(r.path[:], PathOf(uri))) }

// SetTraceparent copies the trace id of a W3C traceparent (00-TRACEID-SPANID-FLAGS); nothing
// when it is not one.
func (r *Record) SetTraceparent(tp []byte) {
	r.traceN = 0
	if len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
		r.traceN = uint8(copy(r.trace[:], tp[3:35]))
	}
}

// SetKey copies the Idempotency-Key.
func (r *Record) SetKey(b []byte) { r.keyN = uint8(copy(r.key[:], b)) }

// SetRequestID copies the X-Request-Id.
func (r *Record) SetRequestID(b []byte) { r.reqIDN = uint8(copy(r.reqID[:], b)) }

// SetStormOp copies the value of the baggage member storm-op, if the baggage has one.
func (r *Record) SetStormOp(baggage []byte) {
	r.stormOpN = uint8(copy(r.stormOp[:], BaggageMember(baggage, "storm-op")))
}

// reset clears what the Set methods set.
func (r *Record) reset() {
	r.methodN, r.authN, r.pathN, r.traceN, r.keyN, r.reqIDN, r.stormOpN = 0, 0, 0, 0, 0, 0, 0
	r.Exhausted, r.Error = "", ""
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
