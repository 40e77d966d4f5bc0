package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// The full CLI carries the shared commands, the storm lab and the demo (newRootCmd lists them).
func TestCommands(t *testing.T) {
	var got []string
	for _, c := range newRootCmd(strings.NewReader(""), io.Discard, io.Discard).Commands() {
		got = append(got, c.Name())
	}
	slices.Sort(got)
	if want := []string{"analyze", "demo", "discover", "graph", "observe", "storm"}; !slices.Equal(got, want) {
		t.Fatalf("commands %v, want %v", got, want)
	}
}

// storm --protocol takes http or grpc; anything else is bad input (exit 2) naming the flag
// and the value, before any process starts.
func TestStormProtocolFlag(t *testing.T) {
	var stderr strings.Builder
	code := Execute([]string{"storm", "--protocol", "quic"}, strings.NewReader(""), io.Discard, &stderr)
	if want := `--protocol "quic": unknown, want http or grpc`; code != 2 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), want)
	}
}

// storm's time flags: -o takes text or json, --outage kill or hang; the short preset keeps an
// explicit --max-time-to-answer, which may not exceed the user's timeout (3 s there). All bad
// input (exit 2) named, before any process starts.
func TestStormTimeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"storm", "-o", "yaml"}, `-o "yaml": unknown, want text or json`},
		{[]string{"storm", "--outage", "flood"}, `--outage "flood": unknown, want kill or hang`},
		{[]string{"storm", "-o", "json", "--series"}, `--series prints text: not with -o json`},
		{[]string{"storm", "--short", "--outage", "hang", "--max-time-to-answer", "7s"}, `storm: max time to answer 7s: want 1ms..the user timeout (3s)`},
		// Before: 0 read as "the default", a 50 user requests/s, 50 s run started.
		{[]string{"storm", "--rps", "0"}, `retrycap: --rps 0: want more than 0 (leave the flag out for the default, 50)` + "\n"},
		{[]string{"storm", "--short", "--duration", "0s"}, `retrycap: --duration 0s: want more than 0 (leave the flag out for the default, 50s)` + "\n"},
		{[]string{"storm", "--capacity", "-3"}, `retrycap: --capacity -3: want more than 0 (leave the flag out for the default, 100)` + "\n"},
		{[]string{"storm", "--user-timeout", "0"}, `retrycap: --user-timeout 0s: want more than 0 (leave the flag out for the default, 10s)` + "\n"},
		// Before: unknown command "extra" for "retrycap storm".
		{[]string{"storm", "extra"}, `retrycap: storm: unexpected argument "extra": it takes flags only (--help lists them)` + "\n"},
		{[]string{"demo", "--chart", "/nonexistent/dir/storm.svg"}, `retrycap: demo: --chart: storm: chart path "/nonexistent/dir/storm.svg": its directory: stat /nonexistent/dir: no such file or directory` + "\n"},
		{[]string{"demo", "--exit", "extra"}, `retrycap: demo: unexpected argument "extra": it takes flags only (--help lists them)` + "\n"},
		// Before: found when the chart was written, after the whole run, and the figures lost.
		{[]string{"storm", "--chart", "storm.txt"}, `retrycap: storm: chart path "storm.txt": want a .svg, .png or .pdf file` + "\n"},
		{[]string{"storm", "--chart", "/nonexistent/dir/storm.svg"}, `retrycap: storm: chart path "/nonexistent/dir/storm.svg": its directory: stat /nonexistent/dir: no such file or directory` + "\n"},
	} {
		var stderr strings.Builder
		code := Execute(c.args, strings.NewReader(""), io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// Every command's --help gives examples and its exit status, as docs/cli.md says. Before, demo's
// had neither and storm's no example.
func TestHelpHasExamplesAndExitStatus(t *testing.T) {
	for _, c := range newRootCmd(strings.NewReader(""), io.Discard, io.Discard).Commands() {
		if c.Example == "" {
			t.Errorf("retrycap %s --help shows no example", c.Name())
		}
		if !strings.Contains(c.Long, "Exit status: 0 ") {
			t.Errorf("retrycap %s --help does not say its exit status (\"Exit status: 0 ...\")", c.Name())
		}
	}
}
