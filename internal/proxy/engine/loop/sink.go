package loop

import "net"

// Sink takes the connections the loops hand over (the goroutine engine's
// listener); Push must not block.
type Sink interface {
	Push(c net.Conn)
}
