package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// helpWidth is the width the commands' long help is wrapped at.
const helpWidth = 100

// TestLongHelpWrapped: each paragraph of a command's long help is wrapped at helpWidth columns;
// a line of a wrapped paragraph running past it shows in a terminal as one long line among
// short ones. Before docs19, graph's first paragraph had a 160-column line and analyze's a
// 161-column one.
func TestLongHelpWrapped(t *testing.T) {
	checked := 0
	for _, c := range []*cobra.Command{
		NewAnalyzeCmd(nil, io.Discard, io.Discard), NewGraphCmd(nil, io.Discard, io.Discard),
		NewObserveCmd(nil, io.Discard, io.Discard), NewDiscoverCmd(nil, io.Discard, io.Discard),
	} {
		for i, line := range strings.Split(c.Long, "\n") {
			checked++
			if n := len([]rune(line)); n > helpWidth {
				t.Errorf("%s --help, line %d of its long help: %d columns, over %d: %q", c.Name(), i+1, n, helpWidth, line)
			}
		}
	}
	if checked < 40 {
		t.Fatalf("checked %d lines of long help: want 40 or more", checked)
	}
}
