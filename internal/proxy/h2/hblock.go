package h2

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Header blocks are decoded here, not by the Framer's ReadMetaHeaders:
// x/net's readMetaFrame makes a MetaHeadersFrame, its Fields slice (grown
// field by field) and a closure with its captured variables per block,
// about seven allocations a block and three blocks a gRPC call on the
// relay (the request, the answer's headers, its trailers); the relay
// decodes into one slice per connection, reused, and copies only what it
// keeps into its stream's and attempt's own arrays. Every check
// readMetaFrame makes is made here, in the same order, with the same
// errors (docs/decisions.md): CONTINUATION frames read until
// END_HEADERS (their order is still the Framer's checkFrameOrder), a
// fragment larger than twice what the header list may still hold, or any
// fragment after an invalid field, is a connection PROTOCOL_ERROR; an
// HPACK decoding error a connection COMPRESSION_ERROR; a field value
// httpguts rejects, a name that is not a lower-case token, a
// pseudo-header after a regular field, an unknown or duplicate
// pseudo-header, or request and response pseudo-headers mixed, a stream
// PROTOCOL_ERROR; a list over MaxHeaderListSize (SETTINGS_MAX_HEADER_LIST_SIZE
// as x/net counts it, a "trailer" field by its names) is decoded (the
// HPACK table stays in step) but truncated. The differential test against
// x/net's server (diff_test.go) and FuzzRelayFrames hold it to that.

// frameHeaderLen is the length of an HTTP/2 frame header (RFC 9113 4.1).
const frameHeaderLen = 9

// hblock is one decoded header block: its fields, pseudo-headers first.
// It is the reader's, valid until the next block is read.
type hblock struct {
	streamID  uint32
	endStream bool
	truncated bool
	fields    []hpack.HeaderField
	npseudo   int
}

// pseudo is the value of pseudo-header ":"+name, "" if absent.
func (b *hblock) pseudo(name string) string {
	for i := range b.fields[:b.npseudo] {
		if f := &b.fields[i]; f.Name[1:] == name {
			return f.Value
		}
	}
	return ""
}

// regular are the block's regular (non-pseudo) fields.
func (b *hblock) regular() []hpack.HeaderField { return b.fields[b.npseudo:] }

// hreader decodes one connection's header blocks with its HPACK decoder;
// its user (the connection's reader goroutine) serialises it.
type hreader struct {
	fr  *http2.Framer
	dec *hpack.Decoder
	max uint32 // MAX_HEADER_LIST_SIZE advertised: what a block may hold
	blk hblock
	// The block being decoded (emit's state, as readMetaFrame's closure
	// keeps it).
	remain, trailerRemain uint32
	sawRegular            bool
	invalid               error
	wire                  int64 // the block's bytes on the wire so far, frame headers included
}

// maxKeptFields is the most fields a reader's decoding buffer keeps
// between blocks (trim): a larger one, from a block of many small
// fields, is left to the collector rather than held by an idle
// connection.
const maxKeptFields = 256

// trim drops the decoding buffer if a block made it large; the reader
// calls it once the last block was handled.
func (r *hreader) trim() {
	if cap(r.blk.fields) > maxKeptFields {
		r.blk.fields = nil
	}
}

func newHReader(fr *http2.Framer, maxList uint32) *hreader {
	r := &hreader{fr: fr, max: maxList}
	r.dec = hpack.NewDecoder(4096, r.emit) // the method value: once per connection
	r.dec.SetMaxStringLength(int(maxList))
	return r
}

// blockError is a connection error found in a header block, with the
// detail for the GOAWAY's debug data (errors.As finds the code as an
// http2.ConnectionError).
type blockError struct {
	code   http2.ErrCode
	detail string
	field  error // the invalid field a CONTINUATION followed (a *badField), or nil
}

func (e *blockError) Error() string { return "http2: " + e.detail }
func (e *blockError) Unwrap() []error {
	if e.field != nil {
		return []error{http2.ConnectionError(e.code), e.field}
	}
	return []error{http2.ConnectionError(e.code)}
}

// badField is a field of a header block that x/net refuses: its text is
// x/net's (msg, which may quote the field's name), why the relay's fixed
// words for it in an answer to its client (answerWords: as the HTTP/1.1
// path's, forward.Reason, never the upstream's bytes).
type badField struct{ msg, why string }

func (e *badField) Error() string { return e.msg }

// answerWords is why an upstream's frame on one stream, or its header
// block, broke the protocol (err: the Framer's or hreader.read's error),
// in the relay's words for the bad answer it makes
// (forward.BadAnswerError): a refused field in forward.Reason's words, a
// header block that does not decode or reads past the bounds as the
// GOAWAY's debug data says it, any other stream error by its code.
func answerWords(err error, fr *http2.Framer) string {
	var bf *badField
	var se http2.StreamError
	if errors.As(err, &bf) || errors.As(err, &se) && errors.As(se.Cause, &bf) {
		return bf.why // (StreamError has no Unwrap)
	}
	var be *blockError
	if errors.As(err, &be) {
		if be.code == http2.ErrCodeCompression {
			return "its header block cannot be decoded (" + be.detail + ")"
		}
		return be.detail
	}
	if errors.As(err, &se) {
		// The Framer's own (HEADERS padding past the frame, a stream
		// WINDOW_UPDATE of 0): no cause to name.
		return "a frame RFC 9113 forbids on its stream (" + se.Code.String() + ")"
	}
	return "its header block cannot be read (" + blockDetail(err, fr, "frame error") + ")"
}

// blockDetail is the debug data for a connection error: the header
// block's own, else the Framer's (fr.ErrorDetail), else def.
func blockDetail(err error, fr *http2.Framer, def string) string {
	var be *blockError
	if errors.As(err, &be) {
		return be.detail
	}
	if d := fr.ErrorDetail(); d != nil {
		return d.Error()
	}
	return def
}

var errPseudoAfterRegular = &badField{"pseudo header field after regular", "pseudo-header after a regular field"}

// emit is the decoder's: one field of the block (readMetaFrame's emit
// func, appending to the reused slice).
func (r *hreader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		// Not the value: it may be sensitive (as x/net).
		r.invalid = &badField{fmt.Sprintf("invalid header field value for %q", hf.Name), "invalid header value"}
	}
	if hf.IsPseudo() {
		if r.sawRegular {
			r.invalid = errPseudoAfterRegular
		}
	} else {
		r.sawRegular = true
		if !validWireName(hf.Name) {
			r.invalid = &badField{fmt.Sprintf("invalid header field name %q", hf.Name), "invalid header name"}
		}
	}
	if r.invalid != nil {
		r.dec.SetEmitEnabled(false)
		return
	}
	remain := &r.remain
	var size uint32
	if hf.Name == "trailer" {
		// As x/net counts it: each named trailer as a field of its own.
		remain = &r.trailerRemain
		n := strings.Count(hf.Value, ",") + 1
		size = uint32(len(hf.Value)-n+1) + uint32(n)*hpack.HeaderField{}.Size()
	} else {
		size = hf.Size()
	}
	if size > *remain {
		r.dec.SetEmitEnabled(false)
		r.blk.truncated = true
		r.remain, r.trailerRemain = 0, 0
		return
	}
	*remain -= size
	if !r.sawRegular {
		r.blk.npseudo++
	}
	r.blk.fields = append(r.blk.fields, hf)
}

// validWireName is x/net's validWireHeaderFieldName: a token without
// upper case.
func validWireName(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if !httpguts.IsTokenRune(c) || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// read decodes the block hf starts, reading its CONTINUATION frames.
func (r *hreader) read(hf *http2.HeadersFrame) (*hblock, error) {
	r.begin(hf.StreamID, hf.StreamEnded())
	var hc interface {
		HeaderBlockFragment() []byte
		HeadersEnded() bool
	} = hf
	for {
		if err := r.more(hc.HeaderBlockFragment()); err != nil {
			return nil, err
		}
		if hc.HeadersEnded() {
			break
		}
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		hc = f.(*http2.ContinuationFrame) // the Framer's checkFrameOrder guarantees it
	}
	return r.end()
}

// begin starts decoding a block (read, or an event loop that has its
// frames one by one: more for each fragment, end after the last).
func (r *hreader) begin(streamID uint32, endStream bool) {
	b := &r.blk
	clear(b.fields) // no strings of the last block kept alive
	*b = hblock{streamID: streamID, endStream: endStream, fields: b.fields[:0]}
	r.remain, r.trailerRemain, r.sawRegular, r.invalid, r.wire = r.max, r.max, false, nil, 0
	r.dec.SetEmitEnabled(true)
}

// more decodes one fragment of the block (the HEADERS' or a
// CONTINUATION's).
func (r *hreader) more(frag []byte) error {
	// Far more than the list may still hold is not decoded (x/net:
	// CONTINUATION flood, CVE-2023-45288).
	if int64(len(frag)) > 2*int64(r.remain+r.trailerRemain) {
		return &blockError{code: http2.ErrCodeProtocol, detail: "header list larger than SETTINGS_MAX_HEADER_LIST_SIZE"}
	}
	// Nor are more frames than such a list takes: x/net's rule above
	// never fires on empty CONTINUATIONs (nothing to decode, the
	// bound untouched), which a peer may send as fast as the socket
	// takes them, the reader held in the block meanwhile. Each frame
	// counts its 9-byte header against twice the list's bound (a
	// list of 1 MiB in 16 KiB frames is about 1 MiB of them).
	if r.wire += int64(len(frag)) + frameHeaderLen; r.wire > 2*int64(r.max)+frameHeaderLen {
		return &blockError{code: http2.ErrCodeProtocol, detail: "header block in more frames than SETTINGS_MAX_HEADER_LIST_SIZE allows (CONTINUATION flood)"}
	}
	if r.invalid != nil {
		return &blockError{http2.ErrCodeProtocol, "CONTINUATION after an invalid header field: " + r.invalid.Error(), r.invalid}
	}
	if _, err := r.dec.Write(frag); err != nil {
		return &blockError{code: http2.ErrCodeCompression, detail: "HPACK: " + err.Error()}
	}
	return nil
}

// end finishes the block after its last fragment.
func (r *hreader) end() (*hblock, error) {
	b := &r.blk
	if err := r.dec.Close(); err != nil {
		return nil, &blockError{code: http2.ErrCodeCompression, detail: "HPACK: " + err.Error()}
	}
	if r.invalid != nil {
		return nil, http2.StreamError{StreamID: b.streamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	if err := checkPseudos(b.fields[:b.npseudo]); err != nil {
		return nil, http2.StreamError{StreamID: b.streamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return b, nil
}

// checkPseudos is x/net's MetaHeadersFrame.checkPseudos: known names
// only, none twice, not both a request's and a response's.
func checkPseudos(pf []hpack.HeaderField) error {
	var isRequest, isResponse bool
	for i := range pf {
		switch pf[i].Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			isRequest = true
		case ":status":
			isResponse = true
		default:
			return &badField{fmt.Sprintf("invalid pseudo-header %q", pf[i].Name), "unknown pseudo-header"}
		}
		for j := range pf[:i] {
			if pf[i].Name == pf[j].Name {
				return &badField{fmt.Sprintf("duplicate pseudo-header %q", pf[i].Name), "duplicate pseudo-header"}
			}
		}
	}
	if isRequest && isResponse {
		return &badField{"mix of request and response pseudo headers", "request pseudo-headers in an answer"}
	}
	return nil
}
