//go:build linux

package proxy

import (
	"path/filepath"
	"testing"
)

// BenchmarkLoopForwardAccessLog is BenchmarkLoopForward with --access-log=PATH and a request
// carrying the headers the log reads (traceparent, X-Request-Id, baggage): allocs/op is the
// logged path's (the ring slot is filled in place; the background writer's buffer is its own).
// No Idempotency-Key: the exchange copies a request's key (one allocation, log or not). Run beside BenchmarkLoopForward for the cost of the log:
//
//	go test ./internal/proxy -run '^$' -bench 'LoopForward' -benchmem
func BenchmarkLoopForwardAccessLog(b *testing.B) {
	benchLoopLogged(b, filepath.Join(b.TempDir(), "access.log"))
}

// BenchmarkLoopForwardAccessLogOff is the same request with the log off.
func BenchmarkLoopForwardAccessLogOff(b *testing.B) { benchLoopLogged(b, "off") }

func benchLoopLogged(b *testing.B, accessLog string) {
	p := benchLoopRequests(b, []byte("GET http://backend/orders/17?expand=1 HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 3\r\n"+
		"Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"+
		"X-Request-Id: 84961386-6d84-929d-98bd-c5aee93b5c88\r\nBaggage: storm-op=17,userid=9\r\n\r\n"),
		"--service", "bench", "--access-log", accessLog)
	if w := p.accessLog.w; w != nil {
		_ = w.Close()
		b.ReportMetric(float64(w.Dropped()), "dropped")
		if w.Written()+w.Dropped() != uint64(b.N) {
			b.Fatalf("%d lines written, %d dropped, for %d requests", w.Written(), w.Dropped(), b.N)
		}
	}
}
