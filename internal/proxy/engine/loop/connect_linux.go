//go:build linux

package loop

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// dial opens a new connection to the call's target: the address at once
// for an IP, else through the loop's DNS cache (an answer not cached yet
// is looked up off the loop; the attempt waits for it under its timeout).
func (cl *call) dial() {
	l := cl.l
	host, port, err := net.SplitHostPort(cl.target)
	if err != nil {
		cl.failed(&forward.DialError{Err: err})
		return
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		cl.connectAny([]netip.Addr{ip.Unmap()}, 0, port)
		return
	}
	e := l.dns[host]
	if e == nil {
		e = &dnsEntry{}
		l.dns[host] = e
	}
	now := l.now()
	if e.expires != 0 && (len(e.ips) > 0 || now < e.expires) {
		if now >= e.expires {
			l.lookup(host, e) // stale: refresh in the background, use what is known
		}
		if e.err != nil {
			cl.failed(&forward.DialError{Err: e.err})
			return
		}
		e.next++
		cl.connectAny(e.ips, e.next, port)
		return
	}
	e.waiters = append(e.waiters, dnsWaiter{cl, cl.seq, port})
	l.lookup(host, e)
}

// connectAny connects to one of ips, starting at ips[start%len] (the
// cache's round robin) and going on to the next when a connect fails, as
// Go's dialer does, all within the attempt's timeout.
func (cl *call) connectAny(ips []netip.Addr, start int, port string) {
	pn, err := strconv.Atoi(port)
	if err != nil || pn < 0 || pn > 65535 {
		cl.failed(&forward.DialError{Err: fmt.Errorf("bad port %q", port)})
		return
	}
	cl.ips, cl.ipNext, cl.ipLeft, cl.port = ips, start, len(ips), pn
	cl.connectNext()
}

// connectNext tries the next address; with none left it fails the attempt
// with the last connect error.
func (cl *call) connectNext() {
	for cl.ipLeft > 0 {
		ip := cl.ips[cl.ipNext%len(cl.ips)]
		cl.ipNext++
		cl.ipLeft--
		err := cl.connect(ip, cl.port)
		if err == nil {
			return
		}
		if cl.ipLeft == 0 {
			cl.failed(err)
		}
	}
}

// connectFailed: the connect under way failed; try the next address.
func (cl *call) connectFailed(uc *upConn, err error) {
	uc.close()
	cl.uc = nil
	if cl.ipLeft == 0 {
		cl.failed(err)
		return
	}
	cl.connectNext()
}

// connect starts a non-blocking connect; the request is written when
// epoll reports the socket writable. It returns the error of a connect
// that failed at once.
func (cl *call) connect(ip netip.Addr, pn int) error {
	l := cl.l
	family, sa := unix.AF_INET, unix.Sockaddr(&unix.SockaddrInet4{Port: pn, Addr: ip.As4()})
	if ip.Is6() {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: pn, Addr: ip.As16()}
	}
	addr := net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(pn))) //nolint:gosec // checked above
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &forward.DialError{Err: &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("socket", err)}}
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	err = unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		_ = unix.Close(fd)
		return &forward.DialError{Err: &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("connect", err)}}
	}
	uc := &upConn{l: l, fd: fd, target: cl.target, addr: addr, connecting: true}
	if err := l.poll.Add(fd, netpoll.EdgeEvents, uc); err != nil {
		_ = unix.Close(fd)
		return &forward.DialError{Err: err}
	}
	uc.send(cl)
	return nil
}
