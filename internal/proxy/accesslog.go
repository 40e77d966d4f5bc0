package proxy

import (
	"fmt"
	"io"
	"os"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// accessLogOut is the proxy's --access-log: the writer and the file it owns, if any.
type accessLogOut struct {
	w    *accesslog.Writer
	file *os.File
}

// openAccessLog starts the access log --access-log names: none for off, stdout (shared with
// the proxy's startup line, which observe skips), or a file opened for appending.
func (p *Proxy) openAccessLog() error {
	var out io.Writer
	switch p.cfg.AccessLog {
	case sidecar.AccessLogOff:
		return nil
	case sidecar.AccessLogStdout:
		out = os.Stdout
	default:
		f, err := os.OpenFile(p.cfg.AccessLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("--access-log: %w", err)
		}
		out, p.accessLog.file = f, f
	}
	p.accessLog.w = accesslog.New(p.cfg.Service, out, 0)
	p.fw.EnableAccessLog(p.accessLog.w)
	return nil
}

// closeAccessLog writes what the ring holds and closes the file; after the engines drained.
func (p *Proxy) closeAccessLog() {
	if p.accessLog.w != nil {
		_ = p.accessLog.w.Close()
	}
	if p.accessLog.file != nil {
		_ = p.accessLog.file.Close()
	}
}
