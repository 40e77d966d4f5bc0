package labapp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	RunGRPCChild() // this test binary is also the gRPC app child
	os.Exit(m.Run())
}

// connectFront answers CONNECT and tunnels to to, recording the targets.
type connectFront struct {
	ln      net.Listener
	to      string
	mu      sync.Mutex
	targets []string
}

func startFront(t *testing.T, to string) *connectFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &connectFront{ln: ln, to: to}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *connectFront) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	f.mu.Lock()
	f.targets = append(f.targets, req.Host)
	f.mu.Unlock()
	up, err := net.Dial("tcp", f.to)
	if err != nil {
		return
	}
	defer up.Close()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// A gRPC chain app in a child process calls its upstream through the
// HTTPS_PROXY its environment names (CONNECT leaf:50051, the name
// unresolved), with the same method and the inbound call's retrycap-budget,
// baggage, traceparent and idempotency-key; a failing upstream is answered
// UNAVAILABLE.
func TestGRPCAppChildThroughHTTPSProxy(t *testing.T) {
	var mu sync.Mutex
	var seen []metadata.MD
	var methods []string
	fail := false
	srv := grpc.NewServer()
	RegisterGRPC(srv, func(ctx context.Context, method string) error {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		seen, methods = append(seen, md), append(methods, method)
		if fail {
			return status.Error(codes.Unavailable, "leaf down")
		}
		return nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	front := startFront(t, ln.Addr().String())

	p, err := StartGRPCProcess(GRPCConfig{Name: "order", Upstream: "leaf:50051"}, "http://"+front.ln.Addr().String(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(5 * time.Second)
	cc, err := grpc.NewClient("passthrough:///"+p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent := map[string]string{
		"retrycap-budget": "3", "baggage": "storm-op=7,retrycap-budget=3",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "idempotency-key": "k7",
	}
	octx := metadata.NewOutgoingContext(ctx, metadata.New(sent))
	if err := InvokeGRPC(octx, cc, GRPCBuy); err != nil {
		t.Fatalf("call: %v", err)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	err = InvokeGRPC(ctx, cc, GRPCGet)
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "order: call leaf:50051: leaf down" {
		t.Fatalf("failing leaf: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(methods, []string{GRPCBuy, GRPCGet}) {
		t.Fatalf("methods at the leaf %q", methods)
	}
	for k, v := range sent {
		if got := seen[0].Get(k); !reflect.DeepEqual(got, []string{v}) {
			t.Errorf("%s at the leaf: %q, want %q", k, got, v)
		}
	}
	for _, k := range propagated {
		if got := seen[1].Get(k); len(got) != 0 {
			t.Errorf("second call: %s = %q, want none", k, got)
		}
	}
	front.mu.Lock()
	defer front.mu.Unlock()
	if !reflect.DeepEqual(front.targets, []string{"leaf:50051"}) {
		t.Fatalf("CONNECT targets %q, want [leaf:50051] (one connection, through the proxy)", front.targets)
	}
}

// A failing leaf answers UNAVAILABLE; the app above it tries a Get, or a Buy with an
// idempotency-key, Attempts times, and a keyless Buy once.
func TestGRPCFailAndAttempts(t *testing.T) {
	leaf, err := StartGRPC(GRPCConfig{Name: "payment", Fail: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leaf.Close)
	mid, err := StartGRPC(GRPCConfig{Name: "billing", Upstream: leaf.Addr(), Attempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mid.Close)
	cc, err := grpc.NewClient("passthrough:///"+mid.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	for _, tc := range []struct {
		method, key string
		want        int64
	}{{GRPCGet, "", 3}, {GRPCBuy, "", 1}, {GRPCBuy, "k1", 3}} {
		before := leaf.Received()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if tc.key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", tc.key)
		}
		err := InvokeGRPC(ctx, cc, tc.method)
		cancel()
		if got := status.Code(err); got != codes.Unavailable {
			t.Fatalf("%s key %q: %v, want UNAVAILABLE", tc.method, tc.key, err)
		}
		if got := leaf.Received() - before; got != tc.want {
			t.Errorf("%s key %q: the failing leaf received %d calls, want %d", tc.method, tc.key, got, tc.want)
		}
	}
	if got := leaf.Failed(); got != 7 {
		t.Errorf("the leaf answered %d calls with an error, want 7", got)
	}
}
