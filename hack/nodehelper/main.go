// Command nodehelper is the small part of hack/node.sh that a shell cannot do:
//
//	nodehelper forward NETNS TARGET PORTFILE
//	    listens on 127.0.0.1 (an ephemeral port, written to PORTFILE) in the caller's network
//	    namespace and forwards each connection to TARGET (host:port) inside the named network
//	    namespace: the node's API server is the one thing reachable from the host, on loopback.
//	nodehelper dns SERVER NAME
//	    resolves NAME (an A record) by asking SERVER (host:port) over UDP, from the caller's
//	    namespace; prints the addresses; exits 1 if there is no answer.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "forward":
		if len(os.Args) != 5 {
			usage()
		}
		err = forward(os.Args[2], os.Args[3], os.Args[4])
	case "dns":
		if len(os.Args) != 4 {
			usage()
		}
		err = lookup(os.Args[2], os.Args[3])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodehelper:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nodehelper forward NETNS TARGET PORTFILE | nodehelper dns SERVER NAME")
	os.Exit(2)
}

// forward accepts on loopback in this namespace and dials TARGET from a goroutine whose OS thread
// has entered the node's namespace: a socket belongs to the namespace of the thread that created
// it, so every dialed connection lives in the node's namespace while the listener stays here.
func forward(netns, target, portFile string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on loopback: %w", err)
	}
	type dialReq struct {
		reply chan dialRes
	}
	reqs := make(chan dialReq)
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine instead of going back to the
		// scheduler in another namespace.
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + netns)
		if err != nil {
			ready <- fmt.Errorf("open network namespace %s: %w", netns, err)
			return
		}
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("enter network namespace %s: %w", netns, err)
			return
		}
		f.Close()
		ready <- nil
		for r := range reqs {
			c, err := net.DialTimeout("tcp", target, 10*time.Second)
			r.reply <- dialRes{c, err}
		}
	}()
	if err := <-ready; err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := os.WriteFile(portFile+".tmp", []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
		return fmt.Errorf("write port file: %w", err)
	}
	if err := os.Rename(portFile+".tmp", portFile); err != nil {
		return fmt.Errorf("write port file: %w", err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-stop; ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		reply := make(chan dialRes, 1)
		reqs <- dialReq{reply}
		go pipe(c, reply)
	}
}

type dialRes struct {
	c   net.Conn
	err error
}

func pipe(c net.Conn, reply chan dialRes) {
	r := <-reply
	if r.err != nil {
		fmt.Fprintln(os.Stderr, "nodehelper: dial:", r.err)
		c.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go half(r.c, c)
	go half(c, r.c)
	wg.Wait()
	c.Close()
	r.c.Close()
}

func lookup(server, name string) error {
	res := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := res.LookupHost(ctx, name)
	if err != nil {
		return fmt.Errorf("resolve %s at %s: %w", name, server, err)
	}
	fmt.Println(strings.Join(addrs, " "))
	return nil
}
