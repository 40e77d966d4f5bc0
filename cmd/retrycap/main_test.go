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
	if want := []string{"analyze", "demo", "graph", "observe", "storm"}; !slices.Equal(got, want) {
		t.Fatalf("commands %v, want %v", got, want)
	}
}
