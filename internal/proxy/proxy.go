package proxy

import (
	"log"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/retrycap/retrycap/internal/proxy/engine/goroutine"
	"github.com/retrycap/retrycap/internal/proxy/engine/loop"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/h2"
)

// Proxy is one retrycap-proxy instance. Create it with New, run it with
// Start (or Main), stop it with Shutdown.
type Proxy struct {
	cfg *Config
	fw  *forward.Forwarder
	m   *forward.Metrics // fw.M
	// gor is the goroutine engine: the whole proxy under
	// --engine=goroutine, else what the loops hand over.
	gor     *goroutine.Engine
	loops   *loop.Engine       // the event loops, unless --engine=goroutine (or not Linux)
	handoff *goroutine.Handoff // what the loops hand to gor
	h2      *h2.Handler        // h2c: CONNECT tunnels to upstreams and prior knowledge (h2_seam.go)
	admin   *http.Server

	dataLn, adminLn net.Listener
	ready           atomic.Bool
	serveDone       chan error
	accessLog       accessLogOut // --access-log (accesslog.go)
	// loopCount is the number of event loops (0: GOMAXPROCS); Main sets
	// it before it adds the spare P (followSpareProc).
	loopCount int
}

// New builds a proxy from a validated Config. logger may be nil.
func New(cfg *Config, logger *log.Logger) (*Proxy, error) {
	fw := forward.New(forwardConfig(cfg), logger)
	p := &Proxy{cfg: cfg, fw: fw, m: fw.M, gor: goroutine.New(fw)}
	if err := p.openAccessLog(); err != nil {
		return nil, err
	}
	if err := p.initH2(); err != nil {
		return nil, err
	}
	p.gor.ConnectHook = p.h2Connect
	return p, nil
}

// useLoops is the engine selection: the event loops where asked for and
// available (Linux), else the goroutine engine alone.
func (p *Proxy) useLoops() bool { return p.cfg.Engine == "loop" && loop.Available() }
