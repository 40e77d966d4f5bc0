package proxy

import (
	"net"
	"reflect"
	"sync"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// handoffListener is the goroutine engine's listener under the event loop:
// it accepts nothing from the network, only the connections the loops hand
// over (with the bytes they had read), so that fasthttp's server serves
// them with its own accounting, timeouts and graceful shutdown.
type handoffListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, conns: make(chan net.Conn, 256), done: make(chan struct{})}
}

func (h *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept. Connections handed over but not accepted yet are
// closed: the server stops calling Accept once it is closed, and would
// never take them.
func (h *handoffListener) Close() error {
	h.once.Do(func() { close(h.done) })
	h.closeQueued()
	return nil
}

func (h *handoffListener) closeQueued() {
	for {
		select {
		case c := <-h.conns:
			_ = c.Close()
		default:
			return
		}
	}
}

func (h *handoffListener) Addr() net.Addr { return h.addr }

// push hands c over; it never blocks the caller (a loop). After Close, c
// is closed instead.
func (h *handoffListener) push(c net.Conn) {
	select {
	case <-h.done:
		_ = c.Close()
	case h.conns <- c:
		h.closedMeanwhile()
	default:
		go func() {
			select {
			case h.conns <- c:
				h.closedMeanwhile()
			case <-h.done:
				_ = c.Close()
			}
		}()
	}
}

// closedMeanwhile: a connection queued as (or after) the listener closed
// would never be accepted; close what is queued.
func (h *handoffListener) closedMeanwhile() {
	select {
	case <-h.done:
		h.closeQueued()
	default:
	}
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// noDefaultDateOffset locates fasthttp's ResponseHeader.noDefaultDate, the
// flag its server sets from Server.NoDefaultDate (no setter is exported). An
// answer the loop writes must not get the proxy's Date in place of the
// upstream's, as the server's answers do not. ok is false if a fasthttp
// release renames the field; the event loop is then not used.
var noDefaultDateOffset, noDefaultDateOK = func() (uintptr, bool) {
	t := reflect.TypeFor[fasthttp.ResponseHeader]()
	f, ok := t.FieldByName("noDefaultDate")
	if !ok || f.Type.Kind() != reflect.Bool {
		return 0, false
	}
	var off uintptr
	for _, i := range f.Index {
		sf := t.Field(i)
		off += sf.Offset
		t = sf.Type
	}
	return off, true
}()

// setServerDefaults makes h, an upstream's answer, write as it came: no
// default Content-Type, no Date of the proxy's own (fasthttp's parser
// clears both flags the server set).
func setServerDefaults(h *fasthttp.ResponseHeader) {
	h.SetNoDefaultContentType(true)
	if noDefaultDateOK {
		*(*bool)(unsafe.Add(unsafe.Pointer(h), noDefaultDateOffset)) = true
	}
}
