package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// grpc-go reads HTTPS_PROXY once per process (net/http's
// ProxyFromEnvironment), before any test runs here: it points at a TCP
// relay to the proxy the running seam test started (seamTarget).
var seamTarget atomic.Value // string

func init() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				addr, _ := seamTarget.Load().(string)
				if addr == "" {
					return
				}
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	os.Setenv("HTTPS_PROXY", "http://"+ln.Addr().String())
}

func seamProxy(t *testing.T, args ...string) *Proxy {
	t.Helper()
	p := startProxy(t, args...)
	seamTarget.Store(p.Addr())
	t.Cleanup(func() { seamTarget.Store("") })
	return p
}

// failing is a gRPC service (seam.Test/Call, Empty in and out) that
// answers UNAVAILABLE and counts the calls it saw.
type failing struct{ calls atomic.Int64 }

var failingDesc = grpc.ServiceDesc{
	ServiceName: "seam.Test",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(new(emptypb.Empty)); err != nil {
			return nil, err
		}
		srv.(*failing).calls.Add(1)
		return nil, grpcstatus.Error(codes.Unavailable, "down")
	}}},
}

func startFailing(t *testing.T, opts ...grpc.ServerOption) (*failing, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &failing{}
	s := grpc.NewServer(opts...)
	s.RegisterService(&failingDesc, f)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return f, ln.Addr().String()
}

func counterValue(t *testing.T, p *Proxy, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := p.m.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			sum += metricValue(m)
		}
	}
	return sum
}

func metricValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// A grpc-go client with HTTPS_PROXY opens CONNECT order:50051 and speaks
// h2c in it: the proxy terminates it and retries UNAVAILABLE.

func TestH2SeamConnectGRPCRetried(t *testing.T) {
	f, addr := startFailing(t)
	p := seamProxy(t, "--upstreams", "order=3", "--resolve", "order="+addr, "--retry-on", "connect-failure,reset,503,unavailable")
	cc, err := grpc.NewClient("dns:///order:50051", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var tr metadata.MD
	err = cc.Invoke(ctx, "/seam.Test/Call", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
	if grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if got := f.calls.Load(); got != 3 {
		t.Fatalf("server saw %d calls, want 3", got)
	}
	if got := tr.Get("retrycap-exhausted"); !reflect.DeepEqual(got, []string{"attempts"}) {
		t.Fatalf("retrycap-exhausted = %q", got)
	}
	if got := counterValue(t, p, "retrycap_proxy_h2_connections_total", map[string]string{"kind": "connect"}); got != 1 {
		t.Fatalf("h2 connections{connect} = %v", got)
	}
	if got := counterValue(t, p, "retrycap_proxy_h2_requests_total", map[string]string{"upstream": "order", "protocol": "grpc", "code": "UNAVAILABLE"}); got != 1 {
		t.Fatalf("h2 requests{UNAVAILABLE} = %v", got)
	}
}

// TLS in a CONNECT to a known upstream stays a blind tunnel.

func TestH2SeamConnectTLSUntouched(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "order"}, DNSNames: []string{"order"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	f, addr := startFailing(t, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})))
	p := seamProxy(t, "--upstreams", "order=3", "--resolve", "order="+addr, "--retry-on", "connect-failure,reset,503,unavailable")
	cc, err := grpc.NewClient("dns:///order:50051", grpc.WithDisableRetry(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "order"})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = cc.Invoke(ctx, "/seam.Test/Call", new(emptypb.Empty), new(emptypb.Empty))
	if grpcstatus.Code(err) != codes.Unavailable || grpcstatus.Convert(err).Message() != "down" {
		t.Fatalf("err = %v", err)
	}
	if got := f.calls.Load(); got != 1 {
		t.Fatalf("server saw %d calls, want 1 (blind tunnel)", got)
	}
	if got := counterValue(t, p, "retrycap_proxy_tunnels_total", map[string]string{"kind": "connect"}); got != 1 {
		t.Fatalf("tunnels{connect} = %v", got)
	}
	if got := counterValue(t, p, "retrycap_proxy_h2_connections_total", nil); got != 0 {
		t.Fatalf("h2 connections = %v", got)
	}
}

// h2c with prior knowledge on the listener, routed by :authority; a plain
// HTTP/2 request gets the HTTP/1.1 rules: a GET is retried on 503, a POST
// without Idempotency-Key is not.

func TestH2SeamPriorKnowledgeHTTPRules(t *testing.T) {
	var calls atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
			return
		}
		if n := calls.Add(1); r.Method == http.MethodPost || n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "hello")
	})}
	addr := serveH2C(t, srv)
	p := seamProxy(t, "--upstreams", "web=3", "--resolve", "web="+addr)
	tr := &http.Transport{Protocols: srv.Protocols, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, p.Addr())
	}}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(mustReq(t, http.MethodGet, "http://web/x"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello" || calls.Load() != 3 {
		t.Fatalf("GET: %d %q after %d calls", resp.StatusCode, body, calls.Load())
	}
	calls.Store(0)
	resp, err = tr.RoundTrip(mustReq(t, http.MethodPost, "http://web/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || calls.Load() != 1 {
		t.Fatalf("POST: %d after %d calls", resp.StatusCode, calls.Load())
	}
	// With the app's own key a POST is retried; with a key an entry proxy
	// generated (policy.GeneratedKeyPrefix) it is not: the key is no
	// promise of idempotency.
	for _, tc := range []struct {
		key   string
		calls int64
	}{{"k-1", 3}, {"retrycap-gen-00112233445566778899aabbccddeeff", 1}} {
		calls.Store(0)
		req := mustReq(t, http.MethodPost, "http://web/x")
		req.Header.Set("Idempotency-Key", tc.key)
		resp, err = tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || calls.Load() != tc.calls {
			t.Fatalf("POST with key %q: %d after %d calls, want 503 after %d", tc.key, resp.StatusCode, calls.Load(), tc.calls)
		}
	}
	if got := counterValue(t, p, "retrycap_proxy_h2_connections_total", map[string]string{"kind": "prior-knowledge"}); got != 1 {
		t.Fatalf("h2 connections{prior-knowledge} = %v", got)
	}
	if got := counterValue(t, p, "retrycap_proxy_h2_requests_total", map[string]string{"upstream": "web", "protocol": "h2", "code": "200"}); got != 1 {
		t.Fatalf("h2 requests{200} = %v", got)
	}
}

func mustReq(t *testing.T, method, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A gRPC client dialing the proxy itself speaks h2c with prior knowledge;
// its :authority names the upstream.

func TestH2SeamPriorKnowledgeGRPC(t *testing.T) {
	f, addr := startFailing(t)
	p := seamProxy(t, "--upstreams", "order=3", "--resolve", "order="+addr, "--retry-on", "connect-failure,reset,503,unavailable")
	cc := grpcAt(t, p.Addr(), "order:50051")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cc.Invoke(ctx, "/seam.Test/Call", new(emptypb.Empty), new(emptypb.Empty))
	if grpcstatus.Code(err) != codes.Unavailable || f.calls.Load() != 3 {
		t.Fatalf("err %v after %d calls, want UNAVAILABLE after 3", err, f.calls.Load())
	}
	if got := counterValue(t, p, "retrycap_proxy_h2_connections_total", map[string]string{"kind": "prior-knowledge"}); got != 1 {
		t.Fatalf("h2 connections{prior-knowledge} = %v", got)
	}
	checkH2CHandoffLine(t, p)
}

// checkH2CHandoffLine: with the event-loop engine, the prior-knowledge
// connection was handed to the goroutine engine with reason h2c (one
// connection, one hand-off), not as a malformed head; the goroutine engine
// hands nothing off.
func checkH2CHandoffLine(t *testing.T, p *Proxy) {
	t.Helper()
	want := []string{`retrycap_proxy_loop_handoffs_total{reason="h2c"} 1`}
	if p.loops == nil {
		want = nil
	}
	resp, err := http.Get("http://" + p.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "retrycap_proxy_loop_handoffs_total{") && !strings.HasSuffix(l, " 0") {
			lines = append(lines, l)
		}
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("hand-off lines %q, want %q", lines, want)
	}
}

// newDualBackend is newBackend serving HTTP/1.1 and h2c with prior
// knowledge on one port (the same app, reached over either protocol); it
// also records each request's protocol major version.
func newDualBackend(t *testing.T, behave func(n int64, w http.ResponseWriter, r *http.Request)) (*backend, func() []int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	b := &backend{t: t, ln: ln, behave: behave}
	var majors []int
	b.srv = &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.hits.Add(1)
		b.mu.Lock()
		b.budgets = append(b.budgets, r.Header.Get("Retrycap-Budget"))
		b.keys = append(b.keys, r.Header.Get("Idempotency-Key"))
		b.bags = append(b.bags, r.Header.Get("Baggage"))
		majors = append(majors, r.ProtoMajor)
		b.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		b.behave(n, w, r)
	})}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Close() })
	return b, func() []int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return append([]int(nil), majors...)
	}
}

// grpcAt is a gRPC client of the proxy's own port (h2c with prior
// knowledge) whose calls' :authority is authority; closed when the test ends.
func grpcAt(t *testing.T, addr, authority string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithAuthority(authority),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// serveH2C serves srv with h2c (prior knowledge) on a loopback port until
// the test ends and returns the port's address.
func serveH2C(t *testing.T, srv *http.Server) string {
	t.Helper()
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv.Protocols = &protos
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// h2Client speaks h2c with prior knowledge to the proxy's listener; the
// URL's host is the :authority that routes the stream.
func h2Client(t *testing.T, p *Proxy) *http.Client {
	t.Helper()
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, p.Addr())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 15 * time.Second, Transport: tr}
}

// doBody is do, returning the answer's body too.
func doBody(t *testing.T, c *http.Client, method, target string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

var generatedKeyRE = regexp.MustCompile(`^retrycap-gen-[0-9a-f]{32}$`)

// At an entrypoint a plain HTTP/2 POST or PATCH without a key gets a
// generated Idempotency-Key, as over HTTP/1.1: sent once (it makes nothing
// retryable), passed to the app, returned on every failed answer the client
// may retry (5xx, 429, a --retry-on status), not on a success or a plain
// client error; a GET gets none.

func TestH2SeamEntrypointGeneratesKey(t *testing.T) {
	b, majors := newDualBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.Header.Get("X-Status"))
		w.WriteHeader(code)
	})
	p := seamProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--entrypoint", "--chain-cap", "4",
		"--retry-on", "connect-failure,reset,409,502,503,504")
	c := h2Client(t, p)
	for i, tt := range []struct {
		method  string
		code    int
		wantKey bool
	}{
		{"POST", 200, false}, {"POST", 404, false}, {"POST", 409, true}, {"POST", 429, true},
		{"POST", 500, true}, {"POST", 503, true}, {"PATCH", 503, true}, {"GET", 200, false},
	} {
		resp, _ := doBody(t, c, tt.method, "http://svc/pay", map[string]string{"X-Status": strconv.Itoa(tt.code)})
		key := resp.Header.Get("Idempotency-Key")
		if resp.StatusCode != tt.code || (key != "") != tt.wantKey {
			t.Fatalf("%s answered %d: status %d key %q, want %d and key %t", tt.method, tt.code, resp.StatusCode, key, tt.code, tt.wantKey)
		}
		if got := b.hits.Load(); got != int64(i+1) {
			t.Fatalf("%s answered %d: backend hits %d, want %d (one attempt each)", tt.method, tt.code, got, i+1)
		}
		seen := b.keys[i]
		switch {
		case tt.method == "GET" && seen != "":
			t.Fatalf("GET: backend saw key %q, want none", seen)
		case tt.method != "GET" && !generatedKeyRE.MatchString(seen):
			t.Fatalf("%s: backend saw key %q, want retrycap-gen- and 32 hex digits", tt.method, seen)
		case tt.wantKey && key != seen:
			t.Fatalf("%s answered %d: client got key %q, backend saw %q", tt.method, tt.code, key, seen)
		}
		// The generated key's split reserves for the client's retries:
		// the one attempt forwards 2 of the cap of 4 (a GET, retryable
		// here, forwards 2 as its first attempt of three too).
		if b.budgets[i] != "2" {
			t.Fatalf("%s: forwarded budget %q, want 2", tt.method, b.budgets[i])
		}
	}
	if got := majors(); !reflect.DeepEqual(got, []int{2, 2, 2, 2, 2, 2, 2, 2}) {
		t.Fatalf("backend protocols %v, want HTTP/2 throughout", got)
	}
	// Keys are fresh per call.
	if b.keys[2] == b.keys[3] {
		t.Fatalf("two calls got the same key %q", b.keys[2])
	}
}

// One ledger for both protocols: the chain budget a key spent over
// HTTP/1.1 is what an HTTP/2 retry with the key is left with, and the
// other way round, so a client alternating between them gets one budget,
// not two.

func TestH2SeamLedgerSharedAcrossProtocols(t *testing.T) {
	b, majors := newDualBackend(t, status(503))
	p := seamProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--entrypoint", "--chain-cap", "4")
	h1, h2c := clientFor(p), h2Client(t, p)
	const spent = "retrycap-proxy: upstream svc: chain budget of this Idempotency-Key is spent\n"
	for _, tc := range []struct {
		name          string
		first, second *http.Client
	}{{"HTTP/1.1 then HTTP/2", h1, h2c}, {"HTTP/2 then HTTP/1.1", h2c, h1}} {
		t.Run(tc.name, func(t *testing.T) {
			from := b.hits.Load()
			// The keyless POST: a generated key, one attempt forwarding 2
			// (2 reserved for the client's retries).
			resp, _ := doBody(t, tc.first, "POST", "http://svc/pay", nil)
			key := resp.Header.Get("Idempotency-Key")
			if resp.StatusCode != 503 || !generatedKeyRE.MatchString(key) {
				t.Fatalf("first call: status %d key %q", resp.StatusCode, key)
			}
			// The client's retry over the other protocol gets what is left: 2.
			resp, _ = doBody(t, tc.second, "POST", "http://svc/pay", map[string]string{"Idempotency-Key": key})
			if resp.StatusCode != 503 || resp.Header.Get("Idempotency-Key") != "" {
				t.Fatalf("retry: status %d key %q, want 503 and no key (the client's own now)", resp.StatusCode, resp.Header.Get("Idempotency-Key"))
			}
			// Nothing is left, over either protocol.
			for _, c := range []*http.Client{tc.first, tc.second} {
				resp, body := doBody(t, c, "POST", "http://svc/pay", map[string]string{"Idempotency-Key": key})
				if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != "chain" || body != spent {
					t.Fatalf("spent key: status %d exhausted %q body %q", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body)
				}
			}
			if got := b.hits.Load() - from; got != 2 {
				t.Fatalf("backend saw %d calls, want 2", got)
			}
			if got := strings.Join(b.budgets[from:], ","); got != "2,2" {
				t.Fatalf("budgets forwarded %s, want 2,2", got)
			}
			if got := b.keys[from:]; !reflect.DeepEqual(got, []string{key, key}) {
				t.Fatalf("backend saw keys %q, want %q twice", got, key)
			}
		})
	}
	// An app's own key, retryable: three HTTP/2 attempts spend the whole
	// cap (2, 1, 1); an HTTP/1.1 retry with it is refused without an attempt.
	from := b.hits.Load()
	resp, _ := doBody(t, h2c, "POST", "http://svc/pay", map[string]string{"Idempotency-Key": "k-1"})
	if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != "attempts" {
		t.Fatalf("app key over HTTP/2: status %d exhausted %q", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"))
	}
	resp, _ = doBody(t, h1, "POST", "http://svc/pay", map[string]string{"Idempotency-Key": "k-1"})
	if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != "chain" {
		t.Fatalf("app key over HTTP/1.1: status %d exhausted %q", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"))
	}
	if got := strings.Join(b.budgets[from:], ","); got != "2,1,1" {
		t.Fatalf("app key: budgets forwarded %s, want 2,1,1", got)
	}
	if got := majors(); !reflect.DeepEqual(got, []int{1, 2, 2, 1, 2, 2, 2}) {
		t.Fatalf("backend protocols %v", got)
	}
	if got := p.fw.Ledger().Len(); got != 3 {
		t.Fatalf("ledger holds %d keys, want 3", got)
	}
}
