//go:build linux

package proxy

import "testing"

// The deadline header's cost on the whole event-loop path (issue 29: the
// proxy's throughput with Retrycap-Deadline within 3 % of without): one
// keep-alive client through a loop to a backend, the same request with and
// without the header, each reporting the process's CPU per request
// (client, proxy and backend are all in this process, so the figure is
// diluted by theirs, the same on both sides). Run them interleaved:
//
//	go test ./internal/proxy -run '^$' -bench 'LoopDeadline' -benchtime 50000x -count 6
func BenchmarkLoopDeadlineOff(b *testing.B) {
	benchLoopDeadline(b, "GET http://backend/ HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 3\r\n\r\n")
}

func BenchmarkLoopDeadlineOn(b *testing.B) {
	benchLoopDeadline(b, "GET http://backend/ HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 3\r\nRetrycap-Deadline: 5000\r\n\r\n")
}

func benchLoopDeadline(b *testing.B, req string) {
	cpu := startCPU()
	benchLoopRequests(b, []byte(req))
	cpu.report(b)
}
