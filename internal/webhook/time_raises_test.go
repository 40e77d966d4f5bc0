package webhook

import (
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
)

// TestTimeRaises: the bounds a change lengthens, the last try's among them where a layer bounds
// it apart (Linkerd: the retry timeout bounds the tries before it, the response timeout alone the
// last; none: graph.Forever, no bound, the longest).
func TestTimeRaises(t *testing.T) {
	s := time.Second
	cases := []struct {
		name          string
		before, after mesh.LayerTime
		want          string
	}{
		{"Linkerd: the response timeout raised behind a shorter retry timeout",
			mesh.LayerTime{PerTry: s, LastTry: 2 * s}, mesh.LayerTime{PerTry: s, LastTry: 5 * s}, "last-try timeout 2s -> 5s"},
		{"Linkerd: the response timeout removed: the last try unbounded",
			mesh.LayerTime{PerTry: s, LastTry: 2 * s}, mesh.LayerTime{PerTry: s, LastTry: graph.Forever}, "last-try timeout 2s -> unset"},
		{"a per-try timeout alone (no LastTry) before: the last try was bounded by it",
			mesh.LayerTime{PerTry: 2 * s}, mesh.LayerTime{PerTry: s, LastTry: 3 * s}, "last-try timeout 2s -> 3s"},
		{"unbounded on both sides", mesh.LayerTime{PerTry: s, LastTry: graph.Forever}, mesh.LayerTime{PerTry: 2 * s, LastTry: graph.Forever},
			"per-try timeout 1s -> 2s"},
		{"Forever and no per-try timeout are the same: no bound", mesh.LayerTime{PerTry: s, LastTry: graph.Forever}, mesh.LayerTime{}, "per-try timeout 1s -> unset"},
		{"a last try bounded where it was not: a lowering", mesh.LayerTime{PerTry: s, LastTry: graph.Forever}, mesh.LayerTime{PerTry: s, LastTry: 3 * s}, ""},
		{"the response timeout lowered", mesh.LayerTime{PerTry: s, LastTry: 5 * s}, mesh.LayerTime{PerTry: s, LastTry: 2 * s}, ""},
		{"no LastTry on either side: the per-try timeout said once",
			mesh.LayerTime{PerTry: s, Timeout: 4 * s}, mesh.LayerTime{PerTry: 3 * s}, "per-try timeout 1s -> 3s, timeout 4s -> unset"},
		{"Istio: a fault delay added", mesh.LayerTime{PerTry: s}, mesh.LayerTime{PerTry: s, Delay: 7 * s}, "fault delay 0s -> 7s"},
		{"Istio: a fault delay shortened", mesh.LayerTime{Delay: 7 * s}, mesh.LayerTime{Delay: 2 * s}, ""},
		{"nothing changed", mesh.LayerTime{PerTry: s, LastTry: 2 * s, Timeout: 9 * s}, mesh.LayerTime{PerTry: s, LastTry: 2 * s, Timeout: 9 * s}, ""},
	}
	for _, tc := range cases {
		if got := timeRaises(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: timeRaises(%+v, %+v) = %q, want %q", tc.name, tc.before, tc.after, got, tc.want)
		}
	}
}
