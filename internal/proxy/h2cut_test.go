package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// cutWants checks p's one access-log line (its time and duration as "T"
// and 0) and retrycap_proxy_responses_cut_total{upstream} by each side.
func cutWants(t *testing.T, p *Proxy, logPath, upstream, want string, by map[string]float64) {
	t.Helper()
	for _, side := range []string{"upstream", "client", "proxy"} {
		proxytest.Eventually(t, "the cut count by "+side, func() bool {
			return counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": upstream, "by": side}) == by[side]
		})
	}
	if got := onlyLogLine(t, p, logPath); got != want {
		t.Errorf("access log\n%s\nwant\n%s", got, want)
	}
}

// TestH2CutBodyLogged: an HTTP/2 answer whose headers went to the client
// and whose body then ended short is logged, at the stream's end, with the
// cut and the body bytes the proxy read from the upstream, and counted in
// retrycap_proxy_responses_cut_total, as on HTTP/1.1 (TestAdvCutBodyLogged):
// the upstream resets the stream (net/http's server aborting its handler:
// RST_STREAM) or its connection ends mid-body, the client resets the
// stream (net/http's client cancelling: RST_STREAM CANCEL). A whole answer
// adds neither field. Before, the line was written when the answer's
// headers were judged and read "status":200 for all four.
func TestH2CutBodyLogged(t *testing.T) {
	const line = `{"log":"retrycap-access","time":"T","upstream":"backend","method":"GET","authority":"backend","path":"/1","attempt":1,"status":200,"duration_us":0`
	first := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name string
		end  string // what the upstream does after the first 5000 bytes, once the client has them
		want string
		by   map[string]float64
	}{
		{"upstream resets the stream", "reset", line + `,"cut":"upstream","body_bytes":5000}`, map[string]float64{"upstream": 1}},
		{"upstream connection closed", "close", line + `,"cut":"upstream","body_bytes":5000}`, map[string]float64{"upstream": 1}},
		{"client resets the stream", "client", line + `,"cut":"client","body_bytes":5000}`, map[string]float64{"client": 1}},
		{"whole", "whole", line + `}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, handled := make(chan struct{}), make(chan struct{})
			var srv *http.Server
			srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(handled)
				_, _ = io.WriteString(w, first)
				w.(http.Flusher).Flush()
				select {
				case <-hold:
				case <-r.Context().Done():
				}
				switch tc.end {
				case "reset":
					panic(http.ErrAbortHandler) // net/http's HTTP/2 server resets the stream
				case "close":
					_ = srv.Close()
				case "client":
					<-r.Context().Done() // the proxy's reset after the client's
				case "whole":
					_, _ = io.WriteString(w, first)
				}
			})}
			addr := serveH2C(t, srv)
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+addr, "--access-log", logPath)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://backend/1", nil)
			resp, err := h2Client(t, p).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got := make([]byte, len(first))
			if _, err := io.ReadFull(resp.Body, got); err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
				t.Fatalf("the answer's first bytes: HTTP/%d %d, %v", resp.ProtoMajor, resp.StatusCode, err)
			}
			if tc.end == "client" {
				cancel()
			} else {
				close(hold)
			}
			rest, err := io.ReadAll(resp.Body)
			switch {
			case tc.end == "whole" && (err != nil || len(rest) != len(first)):
				t.Fatalf("the whole answer's rest: %d bytes, %v", len(rest), err)
			case tc.end != "whole" && err == nil:
				t.Fatalf("the cut answer read to its end (%d bytes more), want an error", len(rest))
			}
			proxytest.Wait(t, handled, "the upstream's handler")
			cutWants(t, p, logPath, "backend", tc.want, tc.by)
		})
	}
}

// TestH2CutGRPCLogged: a gRPC server-streaming call through the relay.
// Trailers end a stream whole whatever their grpc-status (NOT_FOUND after
// a message: no cut); the upstream's connection ending after a message
// (grpc-go's Server.Stop) is the upstream's cut, though the client gets
// trailers the proxy wrote (UNAVAILABLE); the client cancelling after a
// message is the client's. body_bytes counts the DATA bytes read from the
// upstream: one message of 7 bytes with its 5-byte prefix, 12.
func TestH2CutGRPCLogged(t *testing.T) {
	const line = `{"log":"retrycap-access","time":"T","upstream":"order","method":"POST","authority":"order:50051","path":"/cut.Test/Watch","attempt":1,"status":200,"grpc_status":0,"duration_us":0`
	for _, tc := range []struct {
		name string
		end  string
		code codes.Code // the client's status after the first message
		want string
		by   map[string]float64
	}{
		{"trailers NOT_FOUND", "trailers", codes.NotFound, line + `}`, nil},
		{"upstream stops", "stop", codes.Unavailable, line + `,"cut":"upstream","body_bytes":12}`, map[string]float64{"upstream": 1}},
		{"client cancels", "client", codes.Canceled, line + `,"cut":"client","body_bytes":12}`, map[string]float64{"client": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, handled := make(chan struct{}), make(chan struct{})
			srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
				defer close(handled)
				if err := stream.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					return err
				}
				if err := stream.SendMsg(wrapperspb.String("hello")); err != nil {
					return err
				}
				select {
				case <-hold:
					return grpcstatus.Error(codes.NotFound, "gone")
				case <-stream.Context().Done():
					return stream.Context().Err()
				}
			}))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(srv.Stop)
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxy(t, "--upstreams", "order=3", "--resolve", "order="+ln.Addr().String(), "--access-log", logPath,
				"--retry-on", "reset,unavailable")
			cc := grpcAt(t, p.Addr(), "order:50051")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			st := proxytest.OpenWatch(ctx, t, cc, "/cut.Test/Watch")
			m := new(wrapperspb.StringValue)
			if err := st.RecvMsg(m); err != nil || m.GetValue() != "hello" {
				t.Fatalf("the first message: %q, %v", m.GetValue(), err)
			}
			switch tc.end {
			case "trailers":
				close(hold)
			case "stop":
				go srv.Stop()
			case "client":
				cancel()
			}
			err = st.RecvMsg(m)
			if grpcstatus.Code(err) != tc.code || errors.Is(err, io.EOF) {
				t.Fatalf("after the first message: %v, want %s", err, tc.code)
			}
			proxytest.Wait(t, handled, "the upstream's handler")
			cutWants(t, p, logPath, "order", tc.want, tc.by)
		})
	}
}

// TestDrainCutIsTheProxys: a drain (SIGTERM's Shutdown, --drain-timeout)
// that runs out of time with an answer's body still streaming (an upstream
// that sent the head and a first part, then nothing more) cuts it, and the
// line reads "cut":"proxy", counted by="proxy", on both HTTP/1.1 engines
// and the h2 relay; the line is written before the access log closes.
// Before: the loop engine put the cut down to the side whose read or write
// failed first (its closed connections), the goroutine engine did not cut
// the body at all (fasthttp's drain leaves its connections be: the line
// never reached the log, closed before the body ended), and the h2 relay's
// line was written at the headers, whole-looking.
func TestDrainCutIsTheProxys(t *testing.T) {
	const chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	const drain = 300 * time.Millisecond
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run("http1/"+engine, func(t *testing.T) {
			up := newStreamUpstream(t, []string{chunkedHead + "5\r\nhello\r\n", "", "0\r\n\r\n"}, false, "")
			defer func() { close(up.hold); proxytest.Wait(t, up.ended, "the upstream's end") }()
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String(), "--access-log", logPath)
			c := proxytest.Dial(t, p.Addr())
			c.Send("GET http://backend/1 HTTP/1.1\r\nHost: backend\r\n\r\n")
			got := make([]byte, len(chunkedHead)+len("5\r\nhello\r\n"))
			if _, err := io.ReadFull(c.BR, got); err != nil || string(got) != chunkedHead+"5\r\nhello\r\n" {
				t.Fatalf("the client read %q (%v), want the head and the first chunk", got, err)
			}
			drainCut(t, p, drain, logPath, `{"log":"retrycap-access","time":"T","upstream":"backend","method":"GET","authority":"backend","path":"/1","attempt":1,"status":200,"duration_us":0,"cut":"proxy","body_bytes":5}`)
			if rest := c.Rest(); strings.Contains(rest, "0\r\n\r\n") {
				t.Errorf("the client got the body's end after the cut: %q", rest)
			}
		})
	}
	t.Run("h2", func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("x", 5000))
			w.(http.Flusher).Flush()
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		})}
		addr := serveH2C(t, srv)
		logPath := filepath.Join(t.TempDir(), "access.log")
		p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+addr, "--access-log", logPath)
		resp, err := h2Client(t, p).Get("http://backend/1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadFull(resp.Body, make([]byte, 5000)); err != nil || resp.ProtoMajor != 2 {
			t.Fatalf("the answer's first bytes: HTTP/%d, %v", resp.ProtoMajor, err)
		}
		drainCut(t, p, drain, logPath, `{"log":"retrycap-access","time":"T","upstream":"backend","method":"GET","authority":"backend","path":"/1","attempt":1,"status":200,"duration_us":0,"cut":"proxy","body_bytes":5000}`)
		if rest, err := io.ReadAll(resp.Body); err == nil {
			t.Errorf("the cut answer read to its end (%d bytes more), want an error", len(rest))
		}
	})
}

// drainCut drains p for d (Shutdown, as SIGTERM does with --drain-timeout),
// which must run out of time, then checks the access log (closed by the
// drain) and the cut count.
func drainCut(t *testing.T, p *Proxy, d time.Duration, logPath, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain: %v, want it out of time", err)
	}
	if took := time.Since(start); took > d+2*time.Second {
		t.Errorf("the drain took %v, over its %v and the cut's wait", took, d)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	got := logClock.ReplaceAllStringFunc(strings.TrimSuffix(string(data), "\n"), func(s string) string {
		if strings.HasPrefix(s, `"time"`) {
			return `"time":"T"`
		}
		return `"duration_us":0`
	})
	if got != want {
		t.Errorf("access log after the drain\n%s\nwant\n%s", got, want)
	}
	for side, n := range map[string]float64{"upstream": 0, "client": 0, "proxy": 1} {
		if v := counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": "backend", "by": side}); v != n {
			t.Errorf("retrycap_proxy_responses_cut_total{by=%s} %v, want %v", side, v, n)
		}
	}
}
