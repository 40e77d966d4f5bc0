package h2

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// hblock.go against x/net's own header decoding (Framer.ReadMetaHeaders):
// the same frame bytes read by a Framer with ReadMetaHeaders and by a
// Framer with hreader must give the same blocks (stream, END_STREAM,
// truncation, every field in order) and the same errors (a stream error's
// stream and code, a connection error's code), block after block (the
// HPACK table carried between them).

// readBlocks reads every frame of in and describes the header blocks and
// errors, with x/net's decoding (ours false) or hreader's.
func readBlocks(in []byte, maxList uint32, ours bool) string {
	fr := http2.NewFramer(nil, bytes.NewReader(in))
	fr.SetMaxReadFrameSize(relayMaxFrame)
	var hr *hreader
	if ours {
		hr = newHReader(fr, maxList)
	} else {
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.MaxHeaderListSize = maxList
	}
	var out strings.Builder
	for {
		f, err := fr.ReadFrame()
		var sid uint32
		var end, trunc bool
		var fields []hpack.HeaderField
		if err == nil {
			switch f := f.(type) {
			case *http2.HeadersFrame:
				var b *hblock
				if b, err = hr.read(f); err == nil {
					sid, end, trunc, fields = b.streamID, b.endStream, b.truncated, b.fields
				}
			case *http2.MetaHeadersFrame:
				sid, end, trunc, fields = f.StreamID, f.StreamEnded(), f.Truncated, f.Fields
			default:
				continue
			}
		}
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case err == nil:
			fmt.Fprintf(&out, "block %d end=%v truncated=%v %q\n", sid, end, trunc, fields)
		case errors.As(err, &se):
			fmt.Fprintf(&out, "stream error %d %v\n", se.StreamID, se.Code)
		case errors.As(err, &ce):
			fmt.Fprintf(&out, "connection error %v\n", http2.ErrCode(ce))
			return out.String()
		default:
			fmt.Fprintf(&out, "end\n") // EOF, a frame cut short, a frame too large
			return out.String()
		}
	}
}

// blockFrames writes frames: each entry a header block's fields (name,
// value pairs, encoded with one HPACK encoder in turn), split into a
// HEADERS and CONTINUATION frames of at most split bytes.
func blockFrames(split int, end bool, blocks ...[]string) []byte {
	var out, hb bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	enc := hpack.NewEncoder(&hb)
	for i, kv := range blocks {
		hb.Reset()
		for j := 0; j+1 < len(kv); j += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: kv[j], Value: kv[j+1]})
		}
		blk := hb.Bytes()
		id := uint32(2*i + 1)
		first := true
		for first || len(blk) > 0 {
			n := min(len(blk), split)
			frag := blk[:n]
			blk = blk[n:]
			if first {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndHeaders: len(blk) == 0, EndStream: end})
			} else {
				_ = fr.WriteContinuation(id, len(blk) == 0, frag)
			}
			first = false
		}
	}
	return out.Bytes()
}

var hblockCases = []struct {
	name    string
	maxList uint32
	in      []byte
}{
	{"request-and-answer", relayMaxHeaderList, blockFrames(16384, true,
		req("content-type", "application/grpc", "te", "trailers"), []string{":status", "200", "content-type", "application/grpc"},
		[]string{"grpc-status", "0", "grpc-message", "ok"})},
	{"table-carried", relayMaxHeaderList, blockFrames(16384, false, req("x-a", "1"), req("x-a", "1"), req("x-a", "2"))},
	{"continuations", relayMaxHeaderList, blockFrames(7, true, req("x-long", strings.Repeat("v", 300)), req())},
	{"truncated", 120, blockFrames(16384, true, req("x-a", strings.Repeat("a", 40), "x-b", strings.Repeat("b", 40)), req())},
	{"trailer-counted-by-names", 300, blockFrames(16384, true, req("trailer", "a,b,c,d,e,f,g,h,i,j", "x-after", "1"))},
	{"fragment-over-twice-the-list", 40, blockFrames(16384, true, req("x-a", strings.Repeat("a", 1000)))},
	{"continuation-after-invalid", relayMaxHeaderList, blockFrames(5, true, req("X-Up", "1", "x-pad", strings.Repeat("p", 50)))},
	{"uppercase-name", relayMaxHeaderList, blockFrames(16384, true, req("X-Up", "1"), req())},
	{"bad-value", relayMaxHeaderList, blockFrames(16384, true, req("x-a", "a\x00b"), req())},
	{"pseudo-after-regular", relayMaxHeaderList, blockFrames(16384, true, []string{"x-a", "1", ":method", "GET"}, req())},
	{"unknown-pseudo", relayMaxHeaderList, blockFrames(16384, true, []string{":method", "GET", ":bogus", "1"}, req())},
	{"duplicate-pseudo", relayMaxHeaderList, blockFrames(16384, true, []string{":method", "GET", ":method", "PUT"}, req())},
	{"mixed-pseudo", relayMaxHeaderList, blockFrames(16384, true, []string{":method", "GET", ":status", "200"}, req())},
	{"bad-hpack", relayMaxHeaderList, func() []byte {
		var out bytes.Buffer
		_ = http2.NewFramer(&out, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}, EndHeaders: true})
		return out.Bytes()
	}()},
	{"block-cut-short", relayMaxHeaderList, func() []byte {
		var out bytes.Buffer
		// A literal's length says 10 bytes; 2 follow: an error only
		// at the block's end (Decoder.Close).
		_ = http2.NewFramer(&out, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x40, 0x0a, 'a', 'b'}, EndHeaders: true})
		return out.Bytes()
	}()},
}

func TestHeaderBlocksAsXNet(t *testing.T) {
	for _, tc := range hblockCases {
		t.Run(tc.name, func(t *testing.T) {
			want := readBlocks(tc.in, tc.maxList, false)
			got := readBlocks(tc.in, tc.maxList, true)
			if got != want {
				t.Fatalf("hreader:\n%s\nx/net:\n%s", got, want)
			}
			if !strings.Contains(want, "block") && !strings.Contains(want, "error") {
				t.Fatalf("nothing decoded or refused: %s", want) // the case checks nothing
			}
		})
	}
}

// FuzzHeaderBlocks: any bytes, read as frames by both, the same result;
// `go test -fuzz FuzzHeaderBlocks ./internal/proxy/h2/` explores (each
// input is read in-process: thousands a second).
func FuzzHeaderBlocks(f *testing.F) {
	for _, tc := range hblockCases {
		f.Add(tc.in, tc.maxList)
	}
	f.Fuzz(func(t *testing.T, in []byte, maxList uint32) {
		if maxList == 0 {
			maxList = relayMaxHeaderList
		}
		if got, want := readBlocks(in, maxList, true), readBlocks(in, maxList, false); got != want {
			t.Fatalf("hreader:\n%s\nx/net:\n%s", got, want)
		}
	})
}
