package proxytest

import (
	"net"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// TCP states (include/net/tcp_states.h).
const (
	tcpClose     = 7 // closed (after a reset)
	tcpCloseWait = 8 // the peer closed its end (FIN received)
)

// PeerClosed reports whether every socket of this process whose peer is
// addr (an in-process proxy's connections to a backend at addr) has seen
// the backend's close (FIN: CLOSE_WAIT; a reset: CLOSE), or is gone: what
// a test polls (Eventually) after its backend closed pooled connections,
// before it sends a request that must find them closed.
func PeerClosed(addr string) bool {
	return eachPeer(addr, func(state uint8) bool { return state == tcpCloseWait || state == tcpClose })
}

// eachPeer reports whether ok holds of the TCP state of every socket of
// this process whose peer is addr.
func eachPeer(addr string, ok func(state uint8) bool) bool {
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := syscall.Getpeername(fd)
		if err != nil {
			continue
		}
		if in4, isIn4 := sa.(*syscall.SockaddrInet4); !isIn4 || in4.Port != port {
			continue
		}
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil && !ok(info.State) {
			return false
		}
	}
	return true
}
