package h2

// relayClientBudget bounds what upstreams may send on behalf of one
// client connection's streams before the client took it: the stream
// windows the relay grants upstream (SETTINGS_INITIAL_WINDOW_SIZE 0,
// then WINDOW_UPDATEs) come out of it, and bytes return to it as they
// are passed on to the client, or dropped. A client that opens no window
// (or stops reading) thus holds at most this much in the proxy, however
// many streams it opens, and nothing of the upstream connection's window,
// which is credited on receipt: it cannot stall the other clients of the
// upstream. (The stdlib engine granted every stream the Transport's
// 4 MiB: 50 such streams made the upstream push 201 MiB into the proxy.)
const relayClientBudget = 1 << 20

// relayFirstGrant is a stream's first window: a frame, what most answers
// (a unary call's) need whole; a stream whose answer goes on past it is
// topped up toward relayStreamWindow as the client takes what came. So
// 64 streams of one client start at once without waiting for budget,
// and a large answer ramps up in one round trip.
const relayFirstGrant = relayMaxFrame

// grantUp tops attempt a's upstream window up toward relayStreamWindow
// from its client connection's budget, in WINDOW_UPDATEs of at least a
// quarter window unless the upstream has none left; an attempt the
// budget cannot serve waits in cc.starved. The client connection's mu
// held.
func (a *ratt) grantUp() {
	cc := a.s.cc
	if a.closed || a.state < attOpen || a.upEnded {
		return
	}
	target := int64(relayStreamWindow)
	if !a.grown {
		target = relayFirstGrant
	}
	want := target - a.upAvail - a.held
	if want <= 0 || a.upAvail > 0 && want < target/4 {
		return
	}
	g := min(want, relayClientBudget-cc.upHeld)
	if g <= 0 || a.upAvail > 0 && g < target/4 {
		if !a.starved {
			a.starved = true
			cc.starved = append(cc.starved, a)
		}
		return
	}
	a.upAvail += g
	cc.upHeld += g
	a.uc.writeWindowUpdate(a.id, uint32(g))
	if g < want && !a.starved {
		a.starved = true
		cc.starved = append(cc.starved, a)
	}
}

// creditUp returns k bytes of the attempt's answer to the budget once
// they were passed on to the client (or dropped: padding), and tops the
// window up; mu held.
func (a *ratt) creditUp(k int64) {
	k = min(k, a.held)
	if k <= 0 {
		return
	}
	a.held -= k
	a.s.cc.upHeld -= k
	if a.upAvail < relayFirstGrant/2 {
		// Its answer flows in bulk (the upstream used over half its first
		// window before the client took it): its window may grow to
		// relayStreamWindow. One that trickles (a watch's messages, an
		// answer that stalls) keeps a first grant's window: a window
		// granted and unused holds the client's budget, and four answers
		// that had passed a byte on held all of it at relayStreamWindow,
		// leaving the client's other streams no window at all.
		a.grown = true
	}
	a.grantUp()
	a.s.cc.feedStarved()
}

// returnBudget gives back what the attempt holds as it ends: the window
// the upstream will not use now, and what it sent unless it is the answer
// being passed on (the stream gives that back as it goes, or at its
// close); mu held.
func (a *ratt) returnBudget() {
	cc := a.s.cc
	cc.upHeld -= a.upAvail
	a.upAvail = 0
	if a.s.relayed != a {
		cc.upHeld -= a.held
		a.held = 0
	}
	if a.starved {
		a.starved = false
		for i, b := range cc.starved {
			if b == a {
				copy(cc.starved[i:], cc.starved[i+1:])
				cc.starved[len(cc.starved)-1] = nil
				cc.starved = cc.starved[:len(cc.starved)-1]
				break
			}
		}
	}
	cc.feedStarved()
}

// feedStarved tops up the attempts waiting for budget once a first
// grant's worth of it is free; mu held.
func (cc *cconn) feedStarved() {
	if len(cc.starved) == 0 || relayClientBudget-cc.upHeld < relayFirstGrant {
		return
	}
	st := cc.starved
	cc.starved = nil
	for i, a := range st {
		st[i] = nil
		a.starved = false
		a.grantUp()
	}
}
