package forward

import "net"

// PrefixConn is a connection whose first bytes were already read: Prefix is
// served before the rest of Conn. The event loops hand connections over with
// what they read of them, and the h2c seam passes on what it peeked at.
type PrefixConn struct {
	net.Conn
	Prefix []byte
}

// NetConn is the connection under the prefix.
func (c *PrefixConn) NetConn() net.Conn { return c.Conn }

func (c *PrefixConn) Read(p []byte) (int, error) {
	if len(c.Prefix) > 0 {
		n := copy(p, c.Prefix)
		c.Prefix = c.Prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
