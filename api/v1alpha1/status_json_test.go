package v1alpha1

import (
	"encoding/json"
	"testing"
)

// An empty graph's counts are written as 0: `kubectl get rp` shows AMPLIFICATION 0 and
// `-o jsonpath={.status.edges}` prints 0 instead of nothing.
func TestStatusZeroCountsSerialized(t *testing.T) {
	b, err := json.Marshal(RetryPolicyStatus{Services: 1})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"services":1,"edges":0,"amplification":0}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}
