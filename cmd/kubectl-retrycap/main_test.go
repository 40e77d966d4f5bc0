package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/cli"
)

// The plugin carries only the commands for a cluster and for CI; the storm lab and the demo
// are in the full retrycap binary.
func TestCommands(t *testing.T) {
	var got []string
	for _, c := range newRootCmd(strings.NewReader(""), io.Discard, io.Discard).Commands() {
		got = append(got, c.Name())
	}
	slices.Sort(got)
	if want := []string{"analyze", "discover", "graph", "observe"}; !slices.Equal(got, want) {
		t.Fatalf("commands %v, want %v", got, want)
	}
}

// The shared analyze runs as in the full CLI (internal/cli tests it in full).
func TestAnalyze(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli.Execute(newRootCmd(strings.NewReader(""), &stdout, &stderr), []string{"analyze", "-f", "../../internal/cli/testdata/storm27.yaml", "-o", "json"})
	// With -o json the read summary goes to stderr.
	if code != cli.ExitOverCap || !strings.Contains(stdout.String(), `"amplification": 27`) || !strings.HasPrefix(stderr.String(), "read: 1 file(s)") {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, stdout.String(), stderr.String())
	}
}
