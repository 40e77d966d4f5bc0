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
