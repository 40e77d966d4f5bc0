package loop

import "net"

// Sink takes the connections the loops hand over (the goroutine engine's
// listener); Push must not block.
type Sink interface {
	Push(c net.Conn)
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
