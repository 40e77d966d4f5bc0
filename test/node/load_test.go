package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// dialIn returns a DialContext whose sockets belong to the network namespace at nsPath (the
// node's, or a pod's /proc/PID/ns/net): a socket lives in the namespace of the thread that
// created it, so each dial runs on a goroutine locked to a thread that entered the namespace and
// is never unlocked (the thread ends with it instead of going back to the scheduler elsewhere).
// The connection itself is then used from any goroutine.
func dialIn(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread()
			f, err := os.Open(nsPath)
			if err != nil {
				ch <- res{nil, fmt.Errorf("open network namespace %s: %w", nsPath, err)}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- res{nil, fmt.Errorf("enter network namespace %s: %w", nsPath, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// nodeClient is an HTTP client inside the node's network namespace, a new connection per
// request (each one goes through kube-proxy's rules as they are at that moment, as a fresh
// client's would), never retrying by itself.
func nodeClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: dialIn("/run/netns/" + netnsName), DisableKeepAlives: true},
		Timeout:   15 * time.Second,
	}
}

// steadyLoad sends GET url at a fixed rate from the node's namespace until stopped, and counts
// what came back at the client: every request sent is either answered 200 or counted as a
// failure with its reason.
type steadyLoad struct {
	sent, ok atomic.Int64
	phase    atomic.Value // string: what was happening, prefixed to each failure's reason
	mu       sync.Mutex
	failures map[string]int
	stop     chan struct{}
	done     sync.WaitGroup
}

func startLoad(url string, perSecond int) *steadyLoad {
	l := &steadyLoad{failures: map[string]int{}, stop: make(chan struct{})}
	l.phase.Store("")
	client := nodeClient()
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.sent.Add(1)
			l.done.Add(1)
			go func() {
				defer l.done.Done()
				resp, err := client.Get(url)
				if err != nil {
					l.fail(err.Error())
					return
				}
				_, rerr := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case rerr != nil:
					l.fail("reading the body: " + rerr.Error())
				case resp.StatusCode != http.StatusOK:
					l.fail(fmt.Sprintf("status %d", resp.StatusCode))
				default:
					l.ok.Add(1)
				}
			}()
		}
	}()
	return l
}

func (l *steadyLoad) fail(why string) {
	// The same error on another connection differs only by its ports: counted together.
	if i := strings.Index(why, "->"); i >= 0 {
		why = why[:i] + "->..."
	}
	if p := l.phase.Load().(string); p != "" {
		why = "(" + p + ") " + why
	}
	l.mu.Lock()
	l.failures[why]++
	l.mu.Unlock()
}

// finish stops sending, waits for every request in flight to end, and returns sent, answered
// 200, and the failures by reason.
func (l *steadyLoad) finish() (sent, ok int64, failures []string) {
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for why, n := range l.failures {
		failures = append(failures, fmt.Sprintf("%d x %s", n, why))
	}
	sort.Strings(failures)
	return l.sent.Load(), l.ok.Load(), failures
}
