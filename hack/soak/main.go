// Command soak runs retrycap-proxy (a child process) under a mixed load on
// loopback for a while and checks that it serves as well as the direct path
// and gives back what it took: keep-alive clients (GET, small and large
// POSTs, chunked POSTs), pipelining clients, upgrade (101) and CONNECT
// tunnels, and slowloris clients, against an upstream that closes idle
// keep-alive connections after a random time (20 ms to 3 s, shorter than
// the proxy's --upstream-idle-timeout, as Node.js's 5 s is shorter than the
// old 10 s). The keep-alive mix also runs straight at the upstream (the
// direct path), whose errors are the baseline.
//
//	go build -o /tmp/retrycap-proxy ./cmd/retrycap-proxy
//	go run ./hack/soak -proxy /tmp/retrycap-proxy -engine loop -duration 2m
//
// It prints one summary and exits 1 if the proxy path had an error the
// direct path does not have (a class of error, or more of them), if a
// slowloris was not cut, or if descriptors are not back to the baseline.
// RSS is reported, not judged: with the Go runtime's figures (the admin
// port's Go collector) and the resident set split into anonymous and file
// pages, at the baseline and after each round, it tells retained memory
// from a leak (docs/operating.md, "The proxy's memory after a load").
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	bin := flag.String("proxy", "retrycap-proxy", "the retrycap-proxy binary")
	engine := flag.String("engine", "loop", "--engine of the proxy")
	duration := flag.Duration("duration", 2*time.Minute, "how long the load runs")
	kaClients := flag.Int("keepalive", 16, "keep-alive clients (each on the proxy and on the direct path)")
	pipeClients := flag.Int("pipelined", 4, "pipelining clients")
	tunnels := flag.Int("tunnels", 2, "upgrade and CONNECT clients (each)")
	slow := flag.Int("slowloris", 8, "slowloris clients")
	settle := flag.Duration("settle", 290*time.Second, "how long to watch RSS after the load: two of the forced GCs Go runs every 2 minutes of an idle process (a sync.Pool keeps its objects through one GC, drops them at the next; the scavenger then returns the pages)")
	rounds := flag.Int("rounds", 1, "how many times the load runs (each followed by the settle)")
	flag.Parse()
	os.Exit(run(*bin, *engine, *duration, *settle, *rounds, *kaClients, *pipeClients, *tunnels, *slow))
}

type counters struct {
	mu   sync.Mutex
	errs map[string]int
	ok   atomic.Int64
	max  atomic.Int64 // the longest a slowloris took to be cut, ns
}

func newCounters() *counters { return &counters{errs: map[string]int{}} }

func (c *counters) fail(kind string) {
	c.mu.Lock()
	c.errs[kind]++
	c.mu.Unlock()
}

func (c *counters) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return fmt.Sprintf("%d ok, no errors", c.ok.Load())
	}
	return fmt.Sprintf("%d ok, errors %v", c.ok.Load(), c.errs)
}

func run(bin, engine string, duration, settle time.Duration, rounds, kaClients, pipeClients, tunnels, slow int) int {
	up := startUpstream()
	echo := startEcho()
	cmd := exec.Command(bin, "--engine", engine, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--service", "soak",
		"--upstreams", "svc=3", "--resolve", "svc="+up, "--http-request-timeout", slowBound.String(), "--per-try-timeout", "10s", "--breaker-failures", "5")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 2
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var addr, admin string
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if v, ok := strings.CutPrefix(f, "data="); ok {
				addr = v
			}
			if v, ok := strings.CutPrefix(f, "admin="); ok {
				admin = v
			}
		}
		if addr != "" {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if addr == "" {
		fmt.Println("the proxy did not start:", stderr.String())
		return 2
	}
	pid := cmd.Process.Pid
	// Baseline: after one request (the engines' first-use allocations).
	_ = oneRequest(addr, true)
	time.Sleep(time.Second)
	baseFds, baseRSS := fds(pid), rss(pid)
	baseMem, baseParts := goMem(scrape(admin)), rssParts(pid)

	viaProxy, direct, tun, slowc := newCounters(), newCounters(), newCounters(), newCounters()
	var peakFds, peakRSS, afterFds, afterRSS int
	var roundsOut []string
	// Rounds: the same load again on the same process; what it keeps after
	// each round must not grow (retained pools, not a leak).
	for round := 1; round <= rounds; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range kaClients {
			wg.Add(2)
			go func() { defer wg.Done(); keepAlive(addr, true, i, stop, viaProxy) }()
			go func() { defer wg.Done(); keepAlive(up, false, i, stop, direct) }()
		}
		for range pipeClients {
			wg.Add(1)
			go func() { defer wg.Done(); pipelined(addr, stop, viaProxy) }()
		}
		for range tunnels {
			wg.Add(2)
			go func() { defer wg.Done(); upgrade(addr, stop, tun) }()
			go func() { defer wg.Done(); connect(addr, echo, stop, tun) }()
		}
		for range slow {
			wg.Add(1)
			go func() { defer wg.Done(); slowloris(addr, stop, slowc) }()
		}
		start := time.Now()
		for time.Since(start) < duration {
			time.Sleep(500 * time.Millisecond)
			peakFds, peakRSS = max(peakFds, fds(pid)), max(peakRSS, rss(pid))
		}
		close(stop)
		wg.Wait()
		// Back to the baseline: client connections are closed, pooled upstream
		// ones go after --upstream-idle-timeout (4 s).
		deadline := time.Now().Add(30 * time.Second)
		afterFds = fds(pid)
		for afterFds > baseFds && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			afterFds = fds(pid)
		}
		afterRSS = rss(pid)
		for end := time.Now().Add(settle); time.Now().Before(end); {
			time.Sleep(5 * time.Second)
			afterRSS = min(afterRSS, rss(pid))
		}
		roundsOut = append(roundsOut, fmt.Sprintf("round %d: after it, %d descriptors, RSS %.1f MiB (%s); Go memory %s", round, afterFds, mib(afterRSS), rssParts(pid), goMem(scrape(admin))))
	}
	metrics := scrape(admin)

	fmt.Printf("soak: engine=%s duration=%s x%d rounds keepalive=%d pipelined=%d tunnels=%d+%d slowloris=%d\n",
		engine, duration, rounds, kaClients, pipeClients, tunnels, tunnels, slow)
	fmt.Printf("proxy path (keep-alive + pipelined): %s\n", viaProxy)
	fmt.Printf("direct path (keep-alive):            %s\n", direct)
	fmt.Printf("tunnels (upgrade + CONNECT):         %s\n", tun)
	fmt.Printf("slowloris:                           %d cut with 408 within %s (the bound %s, a sweep, scheduling), %v; the longest took %s\n",
		slowc.ok.Load(), slowBound+slowSlack, slowBound, slowc.errs, time.Duration(slowc.max.Load()).Round(time.Millisecond))
	fmt.Printf("descriptors: baseline %d, peak %d, after %d\n", baseFds, peakFds, afterFds)
	fmt.Printf("RSS: baseline %.1f MiB, peak %.1f MiB, after %.1f MiB (lowest within %s of the end)\n", mib(baseRSS), mib(peakRSS), mib(afterRSS), settle)
	fmt.Printf("at the baseline: RSS %s; Go memory %s\n", baseParts, baseMem)
	for _, m := range []string{"retrycap_proxy_stale_resends_total", "retrycap_proxy_timeouts_total", "retrycap_proxy_accept_pauses_total",
		`retrycap_proxy_retries_total{upstream="svc"}`, `retrycap_proxy_attempts_total{upstream="svc"}`, "retrycap_proxy_loop_handoffs_total"} {
		fmt.Printf("  %s\n", strings.Join(grep(metrics, m), "; "))
	}
	fmt.Printf("clients stalled past the head bound between connect and first byte (408, the rule applied): %d\n", stalledClients.Load())
	for _, l := range roundsOut {
		fmt.Println(l)
	}
	fmt.Printf("proxy log lines: %d\n", strings.Count(stderr.String(), "\n"))
	bad := 0
	viaProxy.mu.Lock()
	direct.mu.Lock()
	for k, n := range viaProxy.errs {
		if n > direct.errs[k] {
			fmt.Printf("FAIL: proxy path error %q x%d, direct path x%d\n", k, n, direct.errs[k])
			bad++
		}
	}
	viaProxy.mu.Unlock()
	direct.mu.Unlock()
	if len(tun.errs) > 0 {
		fmt.Printf("FAIL: tunnel errors %v\n", tun.errs)
		bad++
	}
	if len(slowc.errs) > 0 {
		fmt.Printf("FAIL: slowloris not cut as it should: %v\n", slowc.errs)
		bad++
	}
	if afterFds > baseFds {
		fmt.Printf("FAIL: %d descriptors after, %d at the baseline\n", afterFds, baseFds)
		bad++
	}
	if bad > 0 {
		return 1
	}
	fmt.Println("PASS")
	return 0
}

// slowBound is the proxy's --http-request-timeout in the soak; a slowloris
// must be cut within slowBound+slowSlack (the loop sweeps every quarter of
// the bound; a loaded machine schedules late).
const (
	slowBound = 3 * time.Second
	slowSlack = 3 * time.Second
)

func mib(kb int) float64 { return float64(kb) / 1024 }

func fds(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// rss is VmRSS in KiB.
func rss(pid int) int { return status(pid, "VmRSS") }

// status is a KiB field of /proc/PID/status.
func status(pid int, field string) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// rssParts splits the resident set: anonymous memory (the heap, stacks,
// the runtime's own) and file pages (the binary's code and data, mapped
// in as the load runs paths the baseline did not).
func rssParts(pid int) string {
	return fmt.Sprintf("anonymous %.1f MiB, file %.1f MiB", mib(status(pid, "RssAnon")), mib(status(pid, "RssFile")))
}

func scrape(admin string) string {
	resp, err := http.Get("http://" + admin + "/metrics") //nolint:noctx // a tool
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// goMemStats are the Go runtime's figures (the admin port's Go collector)
// that tell retained memory from live memory: the heap in use (live
// objects and fragmentation), idle spans not yet returned to the OS
// (idle minus released: RSS the scavenger will give back), stacks.
var goMemStats = []struct{ name, label string }{
	{"go_memstats_heap_alloc_bytes", "heap live"},
	{"go_memstats_heap_inuse_bytes", "heap in use"},
	{"go_memstats_heap_idle_bytes", "heap idle"},
	{"go_memstats_heap_released_bytes", "released"},
	{"go_memstats_stack_inuse_bytes", "stacks"},
	{"go_memstats_sys_bytes", "from the OS"},
	{"go_goroutines", "goroutines"},
}

// goMem is goMemStats from a scrape, MiB (goroutines as a count).
func goMem(metrics string) string {
	var out []string
	for _, m := range goMemStats {
		for _, l := range grep(metrics, m.name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, m.name)), 64)
			if err != nil {
				continue
			}
			if m.name == "go_goroutines" {
				out = append(out, fmt.Sprintf("%s %.0f", m.label, v))
			} else {
				out = append(out, fmt.Sprintf("%s %.1f", m.label, v/(1<<20)))
			}
		}
	}
	return strings.Join(out, ", ")
}

func grep(text, prefix string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// startUpstream is the app: HTTP/1.1 keep-alive, echoing "METHOD PATH
// len(body)" and the body, closing each connection idle for a random time
// (20 ms to 3 s, decided per connection); an Upgrade request gets 101 and
// its bytes echoed.
func startUpstream() string { return serve(serveUpstream) }

// serve listens on a loopback port and runs handle on each connection, in its own goroutine;
// it returns the address.
func serve(handle func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

func serveUpstream(c net.Conn) {
	defer c.Close()
	idle := time.Duration(20+rand.IntN(2980)) * time.Millisecond //nolint:gosec // a load generator
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if req.Header.Get("Upgrade") != "" {
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			_, _ = io.Copy(c, br)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		head := fmt.Sprintf("%s %s %d\n", req.Method, req.URL.Path, len(body))
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s%s", len(head)+len(body), head, body); err != nil {
			return
		}
	}
}

// startEcho is a TCP echo server (the CONNECT target).
func startEcho() string {
	return serve(func(c net.Conn) { defer c.Close(); _, _ = io.Copy(c, c) })
}

// request writes one request of the mix: GET, a small POST, a POST over
// 64 KiB (the loop hands it over), a chunked POST; it returns the answer it
// expects.
func request(w io.Writer, viaProxy bool, n int) (want string, err error) {
	target := "/r" + strconv.Itoa(n)
	if viaProxy {
		target = "http://svc" + target
	}
	switch n % 4 {
	case 0:
		_, err = fmt.Fprintf(w, "GET %s HTTP/1.1\r\nHost: svc\r\n\r\n", target)
		return fmt.Sprintf("GET /r%d 0\n", n), err
	case 1, 2:
		size := 100
		if n%4 == 2 {
			size = 70 << 10
		}
		body := strings.Repeat("x", size)
		_, err = fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\n\r\n%s", target, size, body)
		return fmt.Sprintf("POST /r%d %d\n%s", n, size, body), err
	default:
		_, err = fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", target)
		return fmt.Sprintf("POST /r%d 5\nhello", n), err
	}
}

func classify(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case strings.Contains(err.Error(), "reset"):
		return "reset"
	case strings.Contains(err.Error(), "broken pipe"):
		return "broken-pipe"
	}
	return "other"
}

func readAnswer(br *bufio.Reader, want string) (string, bool) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return classify(err), false
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return classify(err), false
	}
	if resp.StatusCode != 200 {
		return "status-" + strconv.Itoa(resp.StatusCode), false
	}
	if string(b) != want {
		return "wrong-body", false
	}
	return "", true
}

func oneRequest(addr string, viaProxy bool) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	want, err := request(c, viaProxy, 0)
	if err != nil {
		return err
	}
	if kind, ok := readAnswer(bufio.NewReader(c), want); !ok {
		return errors.New(kind)
	}
	return nil
}

// keepAlive sends requests on one connection, pausing a random 0-50 ms
// between them (so the upstream's idle closes race the reuses); on an error
// it counts it and reconnects.
func keepAlive(addr string, viaProxy bool, id int, stop <-chan struct{}, cs *counters) {
	var c net.Conn
	var br *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for n := id; !stopped(stop); n++ {
		if c == nil {
			var err error
			if c, err = net.Dial("tcp", addr); err != nil {
				cs.fail("dial")
				time.Sleep(10 * time.Millisecond)
				continue
			}
			br = bufio.NewReader(c)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		want, err := request(c, viaProxy, n)
		kind, ok := "", false
		if err != nil {
			kind = classify(err)
		} else {
			kind, ok = readAnswer(br, want)
		}
		if !ok {
			cs.fail(kind)
			c.Close()
			c = nil
			continue
		}
		cs.ok.Add(1)
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond) //nolint:gosec // a load generator
	}
}

// pipelined writes five requests at once, then reads the five answers.
func pipelined(addr string, stop <-chan struct{}, cs *counters) {
	n := -5
	connections(addr, stop, cs, func() time.Duration {
		return time.Duration(rand.IntN(20)) * time.Millisecond //nolint:gosec // a load generator
	}, func(c net.Conn) {
		n += 5
		dialed := time.Now()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var buf bytes.Buffer
		var wants []string
		for i := range 5 {
			w, _ := request(&buf, true, 4*(n+i)) // GETs: the loop pipelines them
			wants = append(wants, w)
		}
		gap := time.Since(dialed)
		if _, err := c.Write(buf.Bytes()); err != nil {
			cs.fail(classify(err))
			return
		}
		br := bufio.NewReader(c)
		for _, w := range wants {
			if kind, ok := readAnswer(br, w); !ok {
				if kind == "status-408" && gap >= slowBound-time.Second/4 {
					// This client itself was not scheduled between its
					// connect and its first byte for the whole bound
					// (a loaded machine): the 408 is the rule applied.
					stalledClients.Add(1)
					return
				}
				cs.fail("pipelined-" + kind)
				return
			}
			cs.ok.Add(1)
		}
	})
}

// connections is the loop of the clients that open a connection per exchange: until stop, dial
// addr (a failure counted as "dial"), hand the connection to one, close it, wait pause() (nil:
// not at all).
func connections(addr string, stop <-chan struct{}, cs *counters, pause func() time.Duration, one func(c net.Conn)) {
	for !stopped(stop) {
		if c, err := net.Dial("tcp", addr); err != nil {
			cs.fail("dial")
		} else {
			func() {
				defer c.Close()
				one(c)
			}()
		}
		if pause != nil {
			time.Sleep(pause())
		}
	}
}

// stopped reports whether stop is closed, without waiting.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

func answerKind(resp *http.Response, err error) string {
	if err != nil {
		return classify(err)
	}
	return strconv.Itoa(resp.StatusCode)
}

// stalledClients counts connections that got 408 because the soak's own
// client took longer than --http-request-timeout from its connect to its
// first byte (not scheduled on a loaded machine): the rule applied, not an
// error of the proxy.
var stalledClients atomic.Int64

func echoThrough(c net.Conn, br *bufio.Reader, cs *counters) {
	for i := range 5 {
		msg := fmt.Sprintf("ping %d\n", i)
		if _, err := io.WriteString(c, msg); err != nil {
			cs.fail("tunnel-write-" + classify(err))
			return
		}
		line, err := br.ReadString('\n')
		if err != nil || line != msg {
			cs.fail("tunnel-echo")
			return
		}
	}
	cs.ok.Add(1)
}

func upgrade(addr string, stop <-chan struct{}, cs *counters) {
	tunnels(addr, "GET http://svc/ws HTTP/1.1\r\nHost: svc\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", nil, 101, "upgrade", stop, cs)
}

func connect(addr, target string, stop <-chan struct{}, cs *counters) {
	head := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	tunnels(addr, head, &http.Request{Method: "CONNECT"}, 200, "connect", stop, cs)
}

// tunnels opens tunnels one after another until stop: each sends head, expects
// the answer want (101 for an upgrade, 200 for a CONNECT; req is what
// http.ReadResponse needs to read it), then echoes through the tunnel.
func tunnels(addr, head string, req *http.Request, want int, kind string, stop <-chan struct{}, cs *counters) {
	connections(addr, stop, cs, func() time.Duration { return 50 * time.Millisecond }, func(c net.Conn) {
		dialed := time.Now()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		gap := time.Since(dialed)
		_, _ = io.WriteString(c, head)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, req)
		if err == nil && resp.StatusCode == 408 && gap >= slowBound-time.Second/4 {
			stalledClients.Add(1)
			return
		}
		if err != nil || resp.StatusCode != want {
			cs.fail(kind + "-answer-" + answerKind(resp, err))
			return
		}
		echoThrough(c, br, cs)
	})
}

// slowloris sends a head a byte every 300 ms: it must get 408 and be
// closed within --http-request-timeout (slowBound) plus slack.
func slowloris(addr string, stop <-chan struct{}, cs *counters) {
	connections(addr, stop, cs, nil, func(c net.Conn) {
		start := time.Now()
		done := make(chan []byte, 1)
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(3 * (slowBound + slowSlack)))
			b, _ := io.ReadAll(c)
			done <- b
		}()
		head := "GET http://svc/slow HTTP/1.1\r\nHost: svc\r\nX-Slow: " + strings.Repeat("a", 100)
		for i := 0; ; i++ {
			select {
			case b := <-done:
				took := time.Since(start)
				if int64(took) > cs.max.Load() {
					cs.max.Store(int64(took))
				}
				switch {
				case !bytes.HasPrefix(b, []byte("HTTP/1.1 408")):
					cs.fail("not-408")
				case took > slowBound+slowSlack:
					cs.fail("cut-late")
				default:
					cs.ok.Add(1)
				}
				return
			case <-time.After(300 * time.Millisecond):
			}
			if i < len(head) {
				_, _ = c.Write([]byte{head[i]})
			}
		}
	})
}
