// Command loadgen is an open-loop HTTP/1.1 load generator for
// hack/bench-proxy.sh: it sends requests at a fixed rate over keep-alive
// connections and measures each latency from the request's intended send
// time, so a stall is charged to every request it delays (no coordinated
// omission), as wrk2 does. wrk2 is not packaged for Debian, hence this.
// One exception: when a connection was idle at the intended time, the
// generator's own timer slack is not charged (see runConn).
//
//	go run ./hack/loadgen -addr 127.0.0.1:18080 -rate 2000 -conns 16 -duration 10s
//	go run ./hack/loadgen -addr 127.0.0.1:18081 -target http://backend/ -host backend
//
// It prints one line: "RESULT rate=... sent=... p50=... p99=... p999=...
// max=... errors=..." with latencies in microseconds.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "HOST:PORT to connect to")
	target := flag.String("target", "/", "request target: a path, or an absolute URL for a forward proxy")
	host := flag.String("host", "", "Host header (default: -addr)")
	rate := flag.Int("rate", 2000, "requests per second, all connections together")
	conns := flag.Int("conns", 16, "keep-alive connections")
	duration := flag.Duration("duration", 10*time.Second, "how long to send")
	warmup := flag.Duration("warmup", time.Second, "load sent before measuring, not recorded")
	var extra []string
	flag.Func("header", "a request header line NAME: VALUE sent on every request (repeatable), as wrk -H", func(v string) error {
		name, _, ok := strings.Cut(v, ":")
		if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("%q is not a header line NAME: VALUE", v)
		}
		extra = append(extra, v)
		return nil
	})
	flag.Parse()
	if *rate <= 0 || *conns <= 0 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -rate, -conns and -duration must be > 0")
		os.Exit(2)
	}
	h := *host
	if h == "" {
		h = *addr
	}
	head := "GET " + *target + " HTTP/1.1\r\nHost: " + h + "\r\nUser-Agent: loadgen\r\n"
	for _, line := range extra {
		head += line + "\r\n"
	}
	req := []byte(head + "\r\n")

	// Connection c sends at start + offset(c) + i*period: the connections
	// are staggered so the aggregate is an even rate.
	period := time.Duration(int64(time.Second) * int64(*conns) / int64(*rate))
	start := time.Now().Add(50 * time.Millisecond)
	measureFrom := start.Add(*warmup)
	end := measureFrom.Add(*duration)
	results := make([][]time.Duration, *conns)
	errs := make([]int, *conns)
	var wg sync.WaitGroup
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			offset := period * time.Duration(c) / time.Duration(*conns)
			lat, n := runConn(*addr, req, start.Add(offset), period, measureFrom, end)
			results[c], errs[c] = lat, n
		}(c)
	}
	wg.Wait()
	var all []time.Duration
	nerr := 0
	for c := range results {
		all = append(all, results[c]...)
		nerr += errs[c]
	}
	slices.Sort(all)
	pct := func(p float64) int64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p / 100 * float64(len(all)))
		if i >= len(all) {
			i = len(all) - 1
		}
		return all[i].Microseconds()
	}
	fmt.Printf("RESULT rate=%d sent=%d p50=%d p90=%d p99=%d p999=%d max=%d errors=%d\n",
		*rate, len(all), pct(50), pct(90), pct(99), pct(99.9), pct(100), nerr)
}

// runConn sends on one connection until end and returns the latencies of
// the requests intended at or after measureFrom, and the error count. A
// broken connection is redialled; its requests count as errors.
func runConn(addr string, req []byte, first time.Time, period time.Duration, measureFrom, end time.Time) ([]time.Duration, int) {
	var lat []time.Duration
	nerr := 0
	var conn net.Conn
	var br *bufio.Reader
	var prevDone time.Time
	for intended := first; intended.Before(end); intended = intended.Add(period) {
		if d := time.Until(intended); d > 0 {
			time.Sleep(d)
		}
		if conn == nil {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				nerr++
				continue
			}
			conn, br = c, bufio.NewReaderSize(c, 16<<10)
		}
		// Latency runs from the intended send time when the system under
		// test held this connection past it (the previous response came
		// late): that wait is the proxy's doing. When the connection was
		// free in time, any lateness is this program's own timer slack
		// (up to ~1 ms when Go sleeps in epoll), so it runs from the send.
		from := intended
		if sent := time.Now(); prevDone.Before(intended) {
			from = sent
		}
		err := roundTrip(conn, br, req)
		done := time.Now()
		prevDone = done
		if err != nil {
			nerr++
			conn.Close()
			conn = nil
			continue
		}
		if !intended.Before(measureFrom) {
			lat = append(lat, done.Sub(from))
		}
	}
	if conn != nil {
		conn.Close()
	}
	return lat, nerr
}

var errStatus = errors.New("non-2xx status")

// roundTrip writes req and reads one response with a Content-Length body.
func roundTrip(conn net.Conn, br *bufio.Reader, req []byte) error {
	if _, err := conn.Write(req); err != nil {
		return err
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	ok := len(line) > 12 && line[9] == '2'
	length := 0
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
		if k, v, found := bytes.Cut(line, []byte(":")); found && bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Length")) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return fmt.Errorf("content-length %q: %w", v, err)
			}
		}
	}
	if _, err := br.Discard(length); err != nil {
		return err
	}
	if !ok {
		return errStatus
	}
	return nil
}
