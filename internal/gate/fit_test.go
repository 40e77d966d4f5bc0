package gate

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFitWarnings: the API server keeps about 4 KiB of a response's warnings and drops the rest
// without a word; the gate sends what fits, cuts the first that does not, and says how many it
// left out.
func TestFitWarnings(t *testing.T) {
	many := make([]string, 5000)
	for i := range many {
		many[i] = fmt.Sprintf("Deployment shop/order: annotation retrycap.dev/x-%04d=\"v\" is not one retrycap reads; it is ignored", i)
	}
	const prefix = "RetryPolicy shop/p rewrote retrycap.dev/upstreams of Deployment shop/order: "
	long := prefix + strings.Repeat("é", 100000)
	const tail = "... (cut from 200076 bytes)"
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{name: "all fit: as they are", in: []string{"a", "b"}, want: []string{"a", "b"}},
		{name: "thousands: those that fit, the rest counted", in: many,
			want: append(slices.Clone(many[:33]), "4967 more warning(s) not shown (the API server keeps about 4 KiB of them): retrycap analyze -f on the manifest lists them all")},
		{name: "one too long: cut to the room, then the rest counted", in: []string{long, "next"},
			want: []string{prefix + strings.Repeat("é", WarningBudget-200-len(tail)-len(prefix)) + tail, "1 more warning(s) not shown (the API server keeps about 4 KiB of them): retrycap analyze -f on the manifest lists them all"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FitWarnings(tt.in, WarningBudget)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("FitWarnings: %d warnings, want %d\n got  %.300q\n want %.300q", len(got), len(tt.want), got, tt.want)
			}
			n := 0
			for _, w := range got {
				n += utf8.RuneCountInString(w)
			}
			if n > WarningBudget {
				t.Fatalf("%d characters, budget %d", n, WarningBudget)
			}
		})
	}
}
