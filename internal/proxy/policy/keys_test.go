package policy

import (
	"regexp"
	"testing"
)

// A generated key is the prefix and 32 hex digits, recognised as generated
// (so it makes nothing retryable), and fresh each time.
func TestNewKey(t *testing.T) {
	re := regexp.MustCompile(`^retrycap-gen-[0-9a-f]{32}$`)
	a, b := NewKey(), NewKey()
	for _, k := range [][]byte{a, b} {
		if !re.Match(k) || !IsGeneratedKey(k) || RetryableKey(k) {
			t.Fatalf("key %q: format %t generated %t retryable %t, want true true false", k, re.Match(k), IsGeneratedKey(k), RetryableKey(k))
		}
	}
	if string(a) == string(b) {
		t.Fatalf("two keys equal: %q", a)
	}
}
