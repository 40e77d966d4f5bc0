package webhook

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The live answers are kept for at most limitRangeLiveEntries namespaces whatever the number of
// namespaces pods are created in (each entry a list, almost always empty): the expired ones go
// first, then the one that expires first.
func TestLimitRangeLiveBound(t *testing.T) {
	l := newLimitRangeLookup(nil, nil, logr.Discard())
	now := time.Unix(0, 0)
	l.now = func() time.Time { return now }
	for i := 0; i < 3*limitRangeLiveEntries; i++ {
		l.store(fmt.Sprintf("ns-%d", i), []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "lr"}}})
		now = now.Add(time.Millisecond)
		if len(l.entries) > limitRangeLiveEntries {
			t.Fatalf("after %d namespaces: %d entries, want at most %d", i+1, len(l.entries), limitRangeLiveEntries)
		}
	}
	if len(l.entries) != limitRangeLiveEntries {
		t.Fatalf("%d entries, want %d", len(l.entries), limitRangeLiveEntries)
	}
	// The oldest went first: the newest are kept.
	if _, ok := l.entries[fmt.Sprintf("ns-%d", 3*limitRangeLiveEntries-1)]; !ok {
		t.Fatal("the newest namespace's entry was dropped")
	}
	if _, ok := l.entries["ns-0"]; ok {
		t.Fatal("the oldest namespace's entry was kept over newer ones")
	}
	// Past the TTL, the expired entries make room at once.
	now = now.Add(limitRangeLiveTTL)
	l.store("late", nil)
	if len(l.entries) != 1 {
		t.Fatalf("%d entries after every other expired, want 1", len(l.entries))
	}
}
