// Package proxytest holds the socket-test helpers the proxy's test
// packages share (package proxy's tests of the assembled proxy on either
// engine, package loop's of the event loop's own mechanics, package h2's
// of the relay): a loopback
// backend that counts and records requests, a raw client connection with a
// deadline that reads answers with net/http's reader, polling with a
// deadline instead of sleeps, a body pattern, and a gRPC server stream
// opened with its one request (OpenWatch), and whether a socket's peer
// has closed, read from the kernel's table (PeerClosed, sockets.go: the
// at-most-once matrices' idle cells), and which of a package's tests can
// reach the proxy's -engine test flag (EngineTests: the set `make test`
// runs a second time on the goroutine engine). Test code only: nothing
// outside _test.go files imports it.
package proxytest
