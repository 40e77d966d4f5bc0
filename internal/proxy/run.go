package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/retrycap/retrycap/internal/proxy/engine/goroutine"
	"github.com/retrycap/retrycap/internal/proxy/engine/loop"
)

// Start opens the data and admin listeners and serves in the background.
// /readyz turns OK once the data listener accepts.
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", p.cfg.Listen)
	if err != nil {
		return fmt.Errorf("data listener %s: %w", p.cfg.Listen, err)
	}
	aln, err := net.Listen("tcp", p.cfg.Admin)
	if err != nil {
		ln.Close()
		return fmt.Errorf("admin listener %s: %w", p.cfg.Admin, err)
	}
	aln = newReserveListener(aln, &p.fw.Reserve) // the admin port answers while descriptors are exhausted
	p.dataLn, p.adminLn = ln, aln
	p.fw.Listening(ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(p.m.Reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	p.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.admin.Serve(aln) }()
	p.serveDone = make(chan error, 1)
	if p.useLoops() {
		p.handoff = goroutine.NewHandoff(ln.Addr())
		loops, err := loop.Start(p.fw, ln, p.handoff, p.loopCount)
		if err != nil {
			ln.Close()
			aln.Close()
			return err
		}
		p.loops = loops
		go func() { p.serveDone <- p.gor.Serve(p.h2Listener(p.handoff)) }()
	} else {
		go func() { p.serveDone <- p.gor.Serve(p.h2Listener(ln)) }()
	}
	p.ready.Store(true)
	return nil
}

// Addr is the data listener's address (useful with port 0).
func (p *Proxy) Addr() string { return p.dataLn.Addr().String() }

// AdminAddr is the admin listener's address.
func (p *Proxy) AdminAddr() string { return p.adminLn.Addr().String() }

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes what is left.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.ready.Store(false)
	var loopErr error
	if p.loops != nil {
		// The loops' listener descriptor closes once they stopped watching
		// it; this is the proxy's own.
		_ = p.dataLn.Close()
		loopErr = p.loops.Shutdown(ctx)
	}
	err := p.gor.Shutdown(ctx)
	h2Err := p.shutdownH2(ctx)
	if p.admin != nil { // nil before Start
		_ = p.admin.Close()
	}
	p.closeAccessLog()
	if err = errors.Join(loopErr, err, h2Err); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	return nil
}

// Main is the retrycap-proxy command: parse flags, serve until SIGTERM or
// SIGINT, drain within --drain-timeout. It returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "retrycap-proxy: %v\n", err)
		return 2
	}
	if cfg.Check {
		cfg.Describe(stdout)
		return 0
	}
	logger := log.New(stderr, "retrycap-proxy: ", log.LstdFlags)
	p, err := New(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "retrycap-proxy: %v\n", err)
		return 1
	}
	loops := runtime.GOMAXPROCS(0)
	if p.useLoops() {
		p.loopCount = loops
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if err := p.Start(); err != nil {
		fmt.Fprintf(stderr, "retrycap-proxy: %v\n", err)
		return 1
	}
	if p.loops != nil {
		stop := make(chan struct{})
		defer close(stop)
		followSpareProc(loops, p.loops.Calls, stop)
	}
	// Parents that start the proxy on port 0 read the real ports from this line.
	fmt.Fprintf(stdout, "retrycap-proxy: listening data=%s admin=%s service=%s\n", p.Addr(), p.AdminAddr(), cfg.Service)
	select {
	case s := <-sig:
		logger.Printf("%v: draining for up to %s", s, cfg.DrainTimeout)
	case err := <-p.serveDone:
		logger.Printf("serve: %v", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		logger.Printf("%v", err)
		return 1
	}
	return 0
}
