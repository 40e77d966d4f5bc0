package forward

import (
	"bufio"
	"errors"
	"io"
	"net/http/httputil"
)

// A chunked answer body is decoded by Go's chunked reader
// (net/http/httputil.NewChunkedReader, net/http's own), not fasthttp's,
// on both engines: fasthttp's parser reads a chunk extension byte by byte
// for as long as it goes on, so an upstream could make the proxy read any
// number of bytes that carry no data (CVE-2023-39326's shape), with every
// read making progress under the body's idle timeout. Go's reader bounds
// a chunk line (4 KiB) and the framing beyond what the data carries
// (16 KiB), and refuses a chunk line ending in a bare LF. The trailer
// section, which the proxy does not pass on, is read here to its end
// within MaxTrailerSection, every line ending in CRLF.

// MaxTrailerSection bounds an answer's trailer section (the lines after
// the last chunk, through the empty line): HAProxy 2.6's buffer. A line
// is bounded by the reader's buffer too.
const MaxTrailerSection = 16 << 10

// ErrTrailerTooLarge is a trailer section over MaxTrailerSection, or a
// trailer line longer than the reader's buffer.
var ErrTrailerTooLarge = errors.New("the upstream's trailer section is larger than 16 KiB")

// ErrTrailerBareLF is a trailer line that ends in a bare LF (as in a
// head, refused: a parser that waits for CRLF never finds its end).
var ErrTrailerBareLF = errors.New("a line of the upstream's trailer section ends in a bare LF")

// NewChunkedBody decodes the chunked body at the start of br: it returns
// the data, then io.EOF once the last chunk and the trailer section were
// read (br is then at the end of the message), or the framing's error.
func NewChunkedBody(br *bufio.Reader) io.Reader {
	return &chunkedBody{br: br, cr: httputil.NewChunkedReader(br)}
}

type chunkedBody struct {
	br  *bufio.Reader
	cr  io.Reader
	err error
}

func (c *chunkedBody) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.cr.Read(p)
	if err == io.EOF {
		if err = skipTrailers(c.br); err == nil {
			err = io.EOF
		}
	}
	c.err = err
	return n, err
}

// skipTrailers reads the trailer section at the start of br, through its
// empty line.
func skipTrailers(br *bufio.Reader) error {
	total := 0
	for {
		line, err := br.ReadSlice('\n')
		total += len(line)
		switch {
		case total > MaxTrailerSection || errors.Is(err, bufio.ErrBufferFull):
			return ErrTrailerTooLarge
		case err == io.EOF:
			return io.ErrUnexpectedEOF
		case err != nil:
			return err
		case len(line) < 2 || line[len(line)-2] != '\r':
			return ErrTrailerBareLF
		case len(line) == 2:
			return nil
		}
	}
}
