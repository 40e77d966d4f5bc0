//go:build race

package h2

// raceEnabled: the race detector slows every call down several times,
// past what a test's per-try timeouts allow for.
const raceEnabled = true
