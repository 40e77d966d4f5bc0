package h2

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestReplayServesEachAttemptFromTheStart(t *testing.T) {
	r := newReplay(io.NopCloser(strings.NewReader("hello world")), 64)
	a1, err := r.reader()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := a1.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("attempt 1 read %q %v", buf[:n], err)
	}
	a2, err := r.reader()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a1.Read(buf); !errors.Is(err, errStale) {
		t.Fatalf("superseded attempt read: %v", err)
	}
	all, err := io.ReadAll(a2)
	if err != nil || string(all) != "hello world" {
		t.Fatalf("attempt 2 read %q %v", all, err)
	}
	if !r.replayable() {
		t.Fatal("11 bytes under a 64-byte limit must stay replayable")
	}
	if err := a2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Read(buf); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestReplayOverflowStreamsButCannotReplay(t *testing.T) {
	body := strings.Repeat("x", 10000)
	r := newReplay(io.NopCloser(strings.NewReader(body)), 100)
	a, err := r.reader()
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(a)
	if err != nil || string(all) != body {
		t.Fatalf("read %d bytes, %v", len(all), err)
	}
	if r.replayable() {
		t.Fatal("10000 bytes over a 100-byte limit must not be replayable")
	}
	if _, err := r.reader(); err == nil {
		t.Fatal("a second attempt after overflow was allowed")
	}
	if len(r.buf) != 0 {
		t.Fatalf("%d bytes kept after overflow, all of them sent", len(r.buf))
	}
}

func TestGRPCTimeoutAndPushbackParsing(t *testing.T) {
	for in, want := range map[string]int64{"1S": 1e9, "250m": 250e6, "3u": 3000, "7n": 7, "2M": 120e9, "1H": 3600e9} {
		d, ok := parseTimeout(in)
		if !ok || int64(d) != want {
			t.Errorf("parseTimeout(%q) = %v %v", in, d, ok)
		}
	}
	for _, bad := range []string{"", "S", "1", "123456789S", "-1S", "1x"} {
		if _, ok := parseTimeout(bad); ok {
			t.Errorf("parseTimeout(%q) accepted", bad)
		}
	}
	for _, d := range []int64{1, 999, 1e6, 123456789, 5e9, 3600e9} {
		got, ok := parseTimeout(formatTimeout(durationOf(d)))
		if !ok || int64(got) < d {
			t.Errorf("formatTimeout(%d) = %q -> %v", d, formatTimeout(durationOf(d)), got)
		}
	}
	if w, has, stop := parsePushback([]string{"200"}); !has || stop || w.Milliseconds() != 200 {
		t.Errorf("pushback 200: %v %v %v", w, has, stop)
	}
	for _, v := range []string{"-1", "x", ""} {
		if _, has, stop := parsePushback([]string{v}); has || !stop {
			t.Errorf("pushback %q: has %v stop %v", v, has, stop)
		}
	}
	if _, has, stop := parsePushback(nil); has || stop {
		t.Error("absent pushback")
	}
	if got := encodeMessage("50% é\n"); got != "50%25 %C3%A9%0A" {
		t.Errorf("encodeMessage = %q", got)
	}
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }
