package h2

import "strconv"

// attState is where an attempt's request stands on its upstream stream:
// one lifecycle that was three booleans (waiting, opened, sentEnd), each
// legal only with some values of the others. The legal moves are
// attMoves; (*ratt).to refuses any other.
//
// The rest of an attempt's flags are not this lifecycle and stay flags,
// because they move independently of it (and of each other):
//   - gotHeaders/upEnded: the answer's side; an upstream answers (and may
//     end its answer) before the request ended, or resets a stream whose
//     HEADERS it never read;
//   - judged: the policy's verdict, reached on an answer, a reset or a
//     timeout in any request state;
//   - closed: the attempt's resources released (release), judged or not;
//   - timedOut, cut, starved, grown, blocked: timer and flow-control
//     facts that hold in several request states.
//
// The stream's own flags (reqEnd, outEnd, headersSent, respDone, ...) are
// the client side of RFC 9113 5.1, decided by cconn.state; overflow and
// probe are facts about the call, not states.
type attState uint8

const (
	attNew    attState = iota // no upstream stream: just started, or to be re-sent (GOAWAY, REFUSED_STREAM)
	attQueued                 // in its pool's queue for a connection with room (rpool.acquire)
	attOpen                   // HEADERS sent on an upstream stream, the request body under way
	attSent                   // the request ended on the upstream stream (END_STREAM sent)
)

var attStateNames = [...]string{attNew: "new", attQueued: "queued", attOpen: "open", attSent: "sent"}

func (st attState) String() string {
	if int(st) < len(attStateNames) {
		return attStateNames[st]
	}
	return "attState(" + strconv.Itoa(int(st)) + ")"
}

// attMoves are the legal moves, from -> to.
var attMoves = [4][4]bool{
	// Dispatched: queued (no connection has room), or opened on a
	// connection, ended at once when the request has no body.
	attNew: {attQueued: true, attOpen: true, attSent: true},
	// The pool's answer (retryAcquire): dispatched again, or failed.
	attQueued: {attNew: true},
	// The body's end sent; or the stream unprocessed, to be re-sent.
	attOpen: {attSent: true, attNew: true},
	// Unprocessed after the request ended (GOAWAY below its id,
	// REFUSED_STREAM): re-sent.
	attSent: {attNew: true},
}

// legalMove reports whether an attempt may go from one state to another.
func legalMove(from, to attState) bool {
	return int(from) < len(attMoves) && int(to) < len(attMoves[from]) && attMoves[from][to]
}

// strictStates makes an illegal move panic: set by this package's tests,
// so a move the table does not know fails the test that made it. A
// running sidecar refuses the move instead (the state stays where it
// was, as the guards that read it expect) and logs it as the internal
// error it is: one stream's confusion must not take the whole relay,
// with every other client's streams, down with a panic.
var strictStates = false

// to moves the attempt to state next; the client connection's mu held.
func (a *ratt) to(next attState) {
	if legalMove(a.state, next) {
		a.state = next
		return
	}
	msg := "h2 relay: internal error: attempt " + strconv.Itoa(a.n) + " of stream " +
		strconv.FormatUint(uint64(a.s.id), 10) + ": illegal move " + a.state.String() + " -> " + next.String()
	if strictStates {
		panic(msg)
	}
	a.s.cc.h.cfg.Logger.Print(msg)
}
