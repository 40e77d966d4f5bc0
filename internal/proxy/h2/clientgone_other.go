//go:build !linux

package h2

import "net"

// sockReset is poll(2)'s POLLHUP/POLLERR on Linux only
// (clientgone_linux.go); elsewhere a client that closed after its FIN is
// found by the FIN probe's failing write alone.
func sockReset(net.Conn) bool { return false }

// watchReset watches nothing off Linux (sockReset).
func watchReset(net.Conn, func()) bool { return false }
