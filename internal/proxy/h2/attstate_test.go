package h2

import (
	"bytes"
	"log"
	"testing"
)

// Every pair of attempt states, legal or not: the table is the
// lifecycle's whole definition, so a move added or dropped shows here.
func TestAttStateMoves(t *testing.T) {
	legal := map[[2]attState]bool{
		{attNew, attQueued}: true,
		{attNew, attOpen}:   true,
		{attNew, attSent}:   true,
		{attQueued, attNew}: true,
		{attOpen, attSent}:  true,
		{attOpen, attNew}:   true,
		{attSent, attNew}:   true,
	}
	states := []attState{attNew, attQueued, attOpen, attSent, attState(4)}
	n := 0
	for _, from := range states {
		for _, to := range states {
			want := legal[[2]attState{from, to}]
			if got := legalMove(from, to); got != want {
				t.Errorf("legalMove(%v, %v) = %v, want %v", from, to, got, want)
			}
			if want {
				n++
			}
		}
	}
	if n != 7 {
		t.Fatalf("%d legal moves checked, want 7", n)
	}
}

func TestAttStateString(t *testing.T) {
	for st, want := range map[attState]string{attNew: "new", attQueued: "queued", attOpen: "open", attSent: "sent", 9: "attState(9)"} {
		if got := st.String(); got != want {
			t.Errorf("attState %d: %q, want %q", uint8(st), got, want)
		}
	}
}

// An illegal move panics under test (strictStates, set in TestMain) and,
// in a running sidecar, is refused and logged.
func TestAttStateIllegalMove(t *testing.T) {
	var logged bytes.Buffer
	h := &Handler{cfg: Config{Logger: log.New(&logged, "", 0)}}
	newAtt := func() *ratt {
		s := &rstream{cc: &cconn{h: h}, useState: useState{id: 7}}
		return &ratt{s: s, attemptState: attemptState{n: 2, state: attQueued}}
	}
	const msg = "h2 relay: internal error: attempt 2 of stream 7: illegal move queued -> sent"

	a := newAtt()
	func() {
		defer func() {
			if r := recover(); r != msg {
				t.Errorf("strict: recovered %v, want %q", r, msg)
			}
		}()
		a.to(attSent)
	}()
	if a.state != attQueued {
		t.Errorf("strict: state %v after an illegal move, want queued", a.state)
	}

	strictStates = false
	defer func() { strictStates = true }()
	a = newAtt()
	a.to(attSent)
	if a.state != attQueued {
		t.Errorf("state %v after an illegal move, want queued", a.state)
	}
	if got := logged.String(); got != msg+"\n" {
		t.Errorf("logged %q, want %q", got, msg+"\n")
	}
	a.to(attNew)
	if a.state != attNew {
		t.Errorf("state %v after queued -> new, want new", a.state)
	}
	if got := logged.String(); got != msg+"\n" {
		t.Errorf("a legal move logged: %q", got)
	}
}
