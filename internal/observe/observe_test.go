package observe

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// readAll parses files into a grouper.
func readAll(t *testing.T, files ...string) *Grouper {
	t.Helper()
	g := NewGrouper()
	for _, f := range files {
		fh, err := os.Open(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		st, err := Parse(fh, Source{Name: f}, g.Add)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		g.AddStats(st)
	}
	return g
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name      string
		files     []string
		threshold int
	}{
		{"istio", []string{"istio-default.log", "istio-json.log", "envoy-default.log"}, 0},
		{"lab-naive", []string{"lab-naive.log"}, 5},
		{"lab-retrycap", []string{"lab-retrycap.log"}, 5},
		{"ingress-nginx", []string{"ingress-nginx.log"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range tc.files {
				if _, err := os.Stat(filepath.Join("testdata", f)); err != nil {
					t.Skipf("no %s", f)
				}
			}
			r := readAll(t, tc.files...).Report(tc.threshold, 0)
			var tab, js bytes.Buffer
			if err := r.WriteTable(&tab); err != nil {
				t.Fatal(err)
			}
			if err := r.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".table.golden", tab.Bytes())
			golden(t, tc.name+".json.golden", js.Bytes())
		})
	}
}

// Istio's default format, exactly: the storm key's 3 attempts at checkout and 9 at payment
// counted from the inbound lines (the callers' outbound lines are the same attempts); the
// connection failures that left no inbound line counted from checkout's outbound lines.
func TestIstioCounts(t *testing.T) {
	g := readAll(t, "istio-default.log", "istio-json.log", "envoy-default.log")
	want := map[string]struct {
		attempts, failures, amp int
		deepest                 string
	}{
		"7c1a4b2e-93d0-9b41-a1f5-2f0d6e1c8a30": {12, 12, 9, "payment"},
		"b5e0d3c4-1f2a-9e8d-8c7b-6a5f4e3d2c1b": {2, 0, 1, "payment"},
		"0f9e8d7c-6b5a-4938-a271-605f4e3d2c1b": {6, 6, 3, "payment"},
		"e2d1c0b9-a8f7-4e6d-9c5b-4a3928171605": {3, 2, 3, "payment"},
		"5d4c3b2a-1908-4f7e-8d6c-5b4a39281706": {3, 2, 3, "catalog"},
	}
	for k, w := range want {
		kr, ok := g.Key(k)
		if !ok {
			t.Fatalf("key %s not found", k)
		}
		if kr.Attempts != w.attempts || kr.Failures != w.failures || kr.Amplification != w.amp || kr.Deepest != w.deepest || kr.Kind != "request-id" {
			t.Errorf("%s: attempts %d failures %d amplification %d at %s (%s); want %d %d %d at %s (request-id)",
				k, kr.Attempts, kr.Failures, kr.Amplification, kr.Deepest, kr.Kind, w.attempts, w.failures, w.amp, w.deepest)
		}
	}
	r := g.Report(5, 0)
	if r.Stats.Skipped != 2 || r.Stats.Bad != 0 || r.Keys != 5 || r.OverCount != 2 {
		t.Fatalf("stats %+v keys %d over %d", r.Stats, r.Keys, r.OverCount)
	}
}

func TestKeyPrecedence(t *testing.T) {
	line := func(extra string) []byte {
		return []byte(`{"log":"retrycap-access","time":"2026-01-02T03:04:05.000006Z","service":"a","upstream":"b","attempt":1,"status":200` + extra + `}`)
	}
	for _, tc := range []struct{ extra, key, kind string }{
		{`,"idempotency_key":"k1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","request_id":"r","storm_op":"7"`, "k1", "idempotency-key"},
		{`,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","request_id":"r","storm_op":"7"`, "4bf92f3577b34da6a3ce929d0e0e4736", "trace-id"},
		{`,"request_id":"r","storm_op":"7"`, "r", "request-id"},
		{`,"storm_op":"7"`, "7", "storm-op"},
		{``, "", ""},
	} {
		a, ok, err := ParseLine(line(tc.extra), Source{})
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", tc.extra, ok, err)
		}
		if k, kind := a.Key(); k != tc.key || kind != tc.kind {
			t.Errorf("%s: key %q (%s), want %q (%s)", tc.extra, k, kind, tc.key, tc.kind)
		}
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1412: "1,412", 1234567: "1,234,567", -1412: "-1,412"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{340 * time.Millisecond: "340 ms", 4200 * time.Millisecond: "4.2 s",
		195600 * time.Millisecond: "195.6 s", 3969 * time.Millisecond: "3.9 s", 22 * time.Minute: "1,320.0 s",
		65*time.Minute + 12300*time.Millisecond: "1 h 5 min 12.3 s"} {
		if got := Span(d); got != want {
			t.Errorf("Span(%v) = %q, want %q", d, got, want)
		}
	}
	r := &Report{OverCount: 1412, Threshold: 5, PeakAttempts: 31, LongestSpan: 22 * time.Minute, Keys: 90000}
	if got := r.Summary(); !strings.HasPrefix(got, "1,412 keys with more than 5 attempts; peak 31 for one key; longest span 1,320.0 s (22 min) (90,000 keys") {
		t.Errorf("summary %q", got)
	}
}

func TestServiceOfHost(t *testing.T) {
	for in, want := range map[string]string{"payment.shop.svc.cluster.local": "payment", "payment:8080": "payment",
		"Payment.shop:80": "payment", "10.0.0.1:80": "10.0.0.1", "[::1]:80": "::1", "order": "order"} {
		if got := ServiceOfHost(in); got != want {
			t.Errorf("ServiceOfHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// Read from a cluster, an Envoy outbound line names its caller (the pod's service): the call
// edges then give the depth, and the caller's line of an attempt the callee also logged is not
// counted twice.
func TestEnvoyCallerFromSource(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "istio-default.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := NewGrouper()
	if _, err := Parse(f, Source{Name: "shop/checkout-1/istio-proxy", Service: "checkout"}, g.Add); err != nil {
		t.Fatal(err)
	}
	kr, ok := g.Key("7c1a4b2e-93d0-9b41-a1f5-2f0d6e1c8a30")
	if !ok {
		t.Fatal("no key")
	}
	if kr.Attempts != 12 || kr.Deepest != "payment" || kr.Amplification != 9 || len(kr.Services) != 2 ||
		kr.Services[0].Service != "checkout" || kr.Services[0].Depth != 0 || kr.Services[1].Depth != 1 {
		t.Fatalf("%+v", kr)
	}
}
