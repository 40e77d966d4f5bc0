package status

import (
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits of the API on what the status and the events say. A longer value is not cut by the API
// server, it is refused: one condition message over its limit made every status patch of the
// policy fail (a 40 KB malformed annotation on one workload froze the whole status, Ready
// included), and an event note over its limit was dropped.
const (
	// MaxConditionMessage is metav1.Condition's message limit (the CRD's maxLength: 32768).
	MaxConditionMessage = 32768
	// MaxEventNote is the note limit of an events.k8s.io/v1 Event (1024, the API server's
	// validation of events).
	MaxEventNote = 1024
)

// Clip returns s when it has at most limit bytes, else its beginning, cut at a character
// boundary, followed by "... (truncated from N bytes)" (N the length of s), in at most limit
// bytes in all. Bytes, not characters: the API's limits count characters, never more than bytes.
func Clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	tail := "... (truncated from " + strconv.Itoa(len(s)) + " bytes)"
	n := max(limit-len(tail), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // never cut a character in two
	}
	return s[:n] + tail
}

// SetCondition is meta.SetStatusCondition with c's message clipped to MaxConditionMessage: the
// one way the status's conditions are written.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) bool {
	c.Message = Clip(c.Message, MaxConditionMessage)
	return meta.SetStatusCondition(conds, c)
}
