package textbom

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

var (
	utf8BOM    = []byte{0xef, 0xbb, 0xbf}
	utf16LEBOM = []byte{0xff, 0xfe}
	utf16BEBOM = []byte{0xfe, 0xff}
)

// utf16 decodes UTF-16 after its BOM (either byte order) to UTF-8.
func utf16() transform.Transformer {
	return unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM).NewDecoder()
}

// Reader reads past a byte-order mark at the start of br: UTF-8's is skipped, UTF-16's
// decodes the rest to UTF-8 (the reader returned is then a new one over br). skipped is the
// number of bytes of br the UTF-8 BOM took (0 otherwise), so that byte offsets still count
// from the start of the file.
func Reader(br *bufio.Reader) (r *bufio.Reader, skipped int64) {
	head, _ := br.Peek(3)
	switch {
	case bytes.HasPrefix(head, utf8BOM):
		_, _ = br.Discard(len(utf8BOM))
		return br, int64(len(utf8BOM))
	case bytes.HasPrefix(head, utf16LEBOM), bytes.HasPrefix(head, utf16BEBOM):
		return bufio.NewReaderSize(transform.NewReader(br, utf16()), br.Size()), 0
	}
	return br, 0
}

// Bytes is data without a UTF-8 BOM, or decoded from UTF-16 when it starts with UTF-16's;
// data as it is otherwise. An error only for UTF-16 that does not decode.
func Bytes(data []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(data, utf8BOM):
		return data[len(utf8BOM):], nil
	case bytes.HasPrefix(data, utf16LEBOM), bytes.HasPrefix(data, utf16BEBOM):
		out, _, err := transform.Bytes(utf16(), data)
		if err != nil {
			return nil, fmt.Errorf("decoding UTF-16 (the file starts with its byte-order mark): %w", err)
		}
		return out, nil
	}
	return data, nil
}

// ReadAll is io.ReadAll(r) through Bytes.
func ReadAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return Bytes(data)
}
