package loop

import (
	"bufio"
	"bytes"
	"errors"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

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

// HeadEnd returns the length of the message head at the start of b (the
// request or status line and the headers, through the empty line), or -1
// if b does not hold all of it. Lines end in CRLF or a bare LF, as
// fasthttp's parser accepts.
func HeadEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		if i < len(b) && b[i] == '\n' {
			return i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2
		}
		if i+1 >= len(b) {
			return -1
		}
	}
}

// parser feeds a loop's bytes to fasthttp's header parsers, which read
// from a bufio.Reader: one reader over a slice, reset per message.
type parser struct {
	sr sliceReader
	br *bufio.Reader
}

func (ps *parser) init() { ps.br = bufio.NewReaderSize(&ps.sr, 2*loopMaxHead) }

func (ps *parser) reader(b []byte) *bufio.Reader {
	ps.sr.b = b
	ps.br.Reset(&ps.sr)
	return ps.br
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, errEndOfHead
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

var errEndOfHead = errors.New("end of head")

// appendWriter is an io.Writer that appends to b (the loop's one output
// buffer, through a bufio.Writer for fasthttp's writers).
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
