package operator

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// While draining, a webhook's answer closes its connection (the client sees Connection: close
// and does not reuse it); before, the connection is kept alive.
func TestDrainingServerClosesConnections(t *testing.T) {
	var draining atomic.Bool
	inner := webhook.NewServer(webhook.Options{})
	s := drainingServer{Server: inner, draining: draining.Load}
	s.Register("/gate", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv := httptest.NewServer(inner.WebhookMux())
	defer srv.Close()
	for _, tc := range []struct {
		draining  bool
		wantClose bool
	}{{false, false}, {true, true}} {
		draining.Store(tc.draining)
		resp, err := srv.Client().Post(srv.URL+"/gate", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// resp.Close: the answer said Connection: close (the client takes the header out).
		if string(b) != "ok" || resp.Close != tc.wantClose {
			t.Errorf("draining %v: body %q, close %v; want ok, close %v", tc.draining, b, resp.Close, tc.wantClose)
		}
	}
}
