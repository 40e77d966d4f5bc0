package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The h2 relay reads a client's socket directly once it has taken what the
// connection's wrappers hold above it (h2.takeHeld): in a CONNECT tunnel
// those are the loop's hand-off prefix and fasthttp's buffered reader.
// A client that writes its CONNECT, the preface and a whole call in one
// write leaves the call's first frames in those buffers; none may be lost
// or reordered when the relay goes to the socket. Each case sends a
// 40,000-byte POST body (more than fasthttp's 8 KiB buffer) and checks the
// upstream's length and SHA-256 of it, and the answer's exact bytes.
func TestConnectPipelinedFramesKept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s len=%d sha=%x", r.URL.Path, len(b), sha256.Sum256(b))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+ln.Addr().String(), "--chain-cap", "4")

	body := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz!?"), 40000/38+1)[:40000]
	for _, tc := range []struct {
		name       string
		oneWrite   bool // the CONNECT and the frames in one write, before the 200
		path       string
		splitAfter int // the frames' bytes written in two parts, the second after this many (0: one part)
	}{
		{"after the 200", false, "/after", 0},
		{"in the CONNECT's write", true, "/pipelined", 0},
		{"in the CONNECT's write, the rest later", true, "/split", 9000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var frames bytes.Buffer
			fr := http2.NewFramer(&frames, nil)
			frames.WriteString(http2.ClientPreface)
			_ = fr.WriteSettings()
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "svc"}, {":path", tc.path}, {"content-length", strconv.Itoa(len(body))}} {
				_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
			for off := 0; off < len(body); off += 16384 {
				end := min(off+16384, len(body))
				_ = fr.WriteData(1, end == len(body), body[off:end])
			}
			c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			head := "CONNECT svc:80 HTTP/1.1\r\nHost: svc:80\r\n\r\n"
			out := frames.Bytes()
			first, later := out, []byte(nil)
			if tc.splitAfter > 0 {
				first, later = out[:tc.splitAfter], out[tc.splitAfter:]
			}
			br := bufio.NewReader(c)
			if tc.oneWrite {
				if _, err := c.Write(append([]byte(head), first...)); err != nil {
					t.Fatal(err)
				}
			} else if _, err := io.WriteString(c, head); err != nil {
				t.Fatal(err)
			}
			const established = "HTTP/1.1 200 Connection established\r\n\r\n"
			got := make([]byte, len(established))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != established {
				t.Fatalf("the tunnel's answer %q (%v), want %q", got, err, established)
			}
			if !tc.oneWrite {
				later = out
			}
			if len(later) > 0 {
				if _, err := c.Write(later); err != nil {
					t.Fatal(err)
				}
			}
			rf := http2.NewFramer(c, br)
			dec := hpack.NewDecoder(4096, nil)
			status, answer := "", []byte(nil)
			for {
				f, err := rf.ReadFrame()
				if err != nil {
					t.Fatalf("reading the answer: %v (status %q, body %q so far)", err, status, answer)
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						_ = rf.WriteSettingsAck()
					}
				case *http2.HeadersFrame:
					fields, err := dec.DecodeFull(f.HeaderBlockFragment())
					if err != nil {
						t.Fatal(err)
					}
					for _, hf := range fields {
						if hf.Name == ":status" {
							status = hf.Value
						}
					}
				case *http2.DataFrame:
					answer = append(answer, f.Data()...)
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY %v (status %q, body %q so far)", f.ErrCode, status, answer)
				case *http2.RSTStreamFrame:
					t.Fatalf("RST_STREAM %v (status %q, body %q so far)", f.ErrCode, status, answer)
				}
				if f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream) {
					break
				}
			}
			want := fmt.Sprintf("%s len=%d sha=%x", tc.path, len(body), sha256.Sum256(body))
			if status != "200" || string(answer) != want {
				t.Fatalf("answer %s %q, want 200 %q", status, answer, want)
			}
		})
	}
}
