//go:build !linux

package h2

import (
	"net"
	"syscall"
)

// sockReader reads a socket directly on Linux only (sockio_linux.go);
// elsewhere the relay reads through net.Conn.
type sockReader struct{ net.Conn }

func newSockReader(net.Conn) *sockReader { return nil }

func sockWrite(fd uintptr, p []byte) (int, error) { return syscall.Write(int(fd), p) }

// peerClosed is poll(2)'s POLLRDHUP on Linux only (sockio_linux.go).
func peerClosed(net.Conn) bool { return false }
