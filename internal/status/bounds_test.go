package status

import (
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClip(t *testing.T) {
	tests := []struct {
		name  string
		s     string
		limit int
		want  string
	}{
		{"short enough", "abc", 3, "abc"},
		{"empty", "", 0, ""},
		{"cut", strings.Repeat("a", 50), 40, strings.Repeat("a", 11) + "... (truncated from 50 bytes)"},
		// "é" is two bytes: the cut moves back to the character's start.
		{"never half a character", "x" + strings.Repeat("é", 30), 40, "x" + strings.Repeat("é", 5) + "... (truncated from 61 bytes)"},
		{"limit below the tail", strings.Repeat("a", 50), 5, "... (truncated from 50 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Clip(tt.s, tt.limit)
			if got != tt.want {
				t.Errorf("Clip(%d bytes, %d) = %q, want %q", len(tt.s), tt.limit, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Clip = %q: not valid UTF-8", got)
			}
		})
	}
}

// TestSetConditionBoundsTheMessage: a message over the API's limit made every status patch
// fail; SetCondition writes it clipped to the limit.
func TestSetConditionBoundsTheMessage(t *testing.T) {
	var conds []metav1.Condition
	SetCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "R", Message: strings.Repeat("m", 100000)})
	got := conds[0].Message
	if len(got) != MaxConditionMessage || !strings.HasSuffix(got, "m... (truncated from 100000 bytes)") {
		t.Errorf("message: %d bytes ending %q, want %d ending in the truncation note", len(got), got[len(got)-40:], MaxConditionMessage)
	}
}
