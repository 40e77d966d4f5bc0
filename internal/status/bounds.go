package status

import (
	"strconv"
	"strings"
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
	// MaxPathServices is the most services a path in the status lists: a longer one keeps its
	// first and last services around one element saying how many were left out. With the
	// lists' MaxItems and MaxListedMessage it bounds the whole status well below the 1.5 MiB
	// etcd takes per object: 50 chains of a 600-service path (names of 57 characters) made a
	// status of over 3 MB, and every write of it failed.
	MaxPathServices = 64
	// MaxListedMessage bounds each message, suggestion and fix of the status's lists
	// (violations, timeViolations, timeoutInversions): they repeat their path.
	MaxListedMessage = 4096
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

// elidePath is p when it has at most MaxPathServices services, else its first and last
// services around "...(N more)...", MaxPathServices elements in all. A new slice either way.
func elidePath(p []string) []string {
	if len(p) <= MaxPathServices {
		return append([]string(nil), p...)
	}
	head := MaxPathServices / 2
	tail := MaxPathServices - head - 1
	out := make([]string, 0, MaxPathServices)
	out = append(out, p[:head]...)
	out = append(out, "...("+strconv.Itoa(len(p)-head-tail)+" more)...")
	return append(out, p[len(p)-tail:]...)
}

// joinPath is a path as the status's worstPath and worstTimePath write it, elided.
func joinPath(p []string) string {
	return strings.Join(elidePath(p), ">")
}

// SetCondition is meta.SetStatusCondition with c's message clipped to MaxConditionMessage: the
// one way the status's conditions are written.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) bool {
	c.Message = Clip(c.Message, MaxConditionMessage)
	return meta.SetStatusCondition(conds, c)
}
