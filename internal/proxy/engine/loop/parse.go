package loop

import "github.com/retrycap/retrycap/internal/proxy/forward"

// ReadBufferSize is a loop's one read buffer, shared by its client sockets.
const ReadBufferSize = 64 << 10

// Limits of what the loop serves itself; a request beyond them is handed
// to the goroutine engine, which answers it as it always did (431 for a
// head over its 8 KiB read buffer, bodies up to 16 MiB).
const (
	loopMaxHead = 8 << 10
	loopMaxBody = forward.BufferedBodyMax
	// loopMaxInput bounds what a connection may have read ahead of the
	// request being served (pipelining); beyond it the loop stops reading
	// that socket until the request is answered.
	loopMaxInput = loopMaxHead + loopMaxBody
)

// appendWriter is an io.Writer that appends to b (the loop's one output
// buffer, through a bufio.Writer for fasthttp's writers).
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
