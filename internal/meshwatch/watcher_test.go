package meshwatch

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// With --mesh-apis=none the watcher asks nothing of the API server (this one does not exist) and
// starts no informer: no Set, no API.
func TestNoneReadsNothing(t *testing.T) {
	w, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Selection: Selection{None: true}, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	var told []Affected
	w.OnChange(func(a Affected) { told = append(told, a) })
	if err := w.Recheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.Set() != nil || len(w.APIs()) != 0 || len(w.running) != 0 {
		t.Errorf("Set %v, APIs %q, %d informers; want none", w.Set(), w.APIs(), len(w.running))
	}
	// The first check tells every subscriber once (the policies' MeshLayers condition), the
	// next ones nothing.
	if err := w.Recheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(told) != 1 || !told[0].All {
		t.Errorf("told %+v, want one change of all namespaces", told)
	}
}
