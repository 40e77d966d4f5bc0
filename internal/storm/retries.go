package storm

import (
	"time"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// The retries target's arithmetic (docs/storm-lab.md, "The retries target and the outage's
// length"): what the naive arm's proxies retry during a hang, by construction, and the most
// the retrycap arm's can. The first grows with the hang; the second does not (the breakers
// open and stay open while payment hangs), so a hang too short cannot show the design's 94 %.

// retriesTarget is the retries target: the retrycap arm sends at least this many percent
// fewer retries during the outage than the naive arm (the design's, from the first
// write-up's fix).
const retriesTarget = 94

// NaiveRetryOffsets are the times, after a user request is sent, at which the naive arm's
// proxies decide a retry for it while payment hangs (accepts, never answers), per proxy
// (entry, gateway, order), on a machine that runs every timer on time: the naive arm has no
// jitter, budget, breaker or deadline, so its schedule is exact. Each attempt at payment ends
// at the order proxy's per-try timeout; a hop's attempt ends at the earlier of its per-try
// timeout and the call below it; a retry is decided when an attempt ends, while attempts are
// left, and waits policy.Backoff. The apps finish their calls whoever waits
// (KeepCallsWhenCallerGone), so the work below a cut attempt goes on; the entry proxy's client
// is the user, who gives up at userTimeout: an entry attempt not ended by then is cut and not
// retried (the proxy's client went away). The edge client's own retries (ClientAttempts) are
// not the proxies' and are not listed, but the work they start is.
func NaiveRetryOffsets(sc Scenario, userTimeout time.Duration) [3][]time.Duration {
	var out [3][]time.Duration
	pt := naivePerTryTimeouts
	const never = time.Duration(1<<63 - 1)
	// call is hop h's proxy called at t by a client that leaves at gone; it returns when the
	// proxy answers (or gone, cut).
	var call func(h int, t, gone time.Duration) time.Duration
	call = func(h int, t, gone time.Duration) time.Duration {
		start := t
		for a := 1; ; a++ {
			end := start + pt[h]
			if h < len(pt)-1 {
				// The app below calls its proxy at once and answers when it answers.
				end = min(end, call(h+1, start, never))
			}
			if end >= gone {
				return gone
			}
			if a >= sc.Attempts[h] {
				return end
			}
			out[h] = append(out[h], end)
			start = end + policy.Backoff(backoffBase, backoffMax, a, false)
		}
	}
	t := time.Duration(0)
	for c := 1; c <= sc.ClientAttempts; c++ {
		end := call(0, t, userTimeout)
		if end >= userTimeout {
			break
		}
		t = end + clientBackoff
	}
	return out
}

// NaiveRetriesInHang is how many retries the naive arm's proxies decide, by construction,
// during a hang of o's length, per proxy: for the user requests sent in it (one every 1/RPS
// from its start), the offsets of NaiveRetryOffsets that fall before the restore. Those sent
// before the hang are not counted (payment served them in 50 ms): it is a floor of what the
// arm can send on an idle machine; a loaded one runs its timers late and decides fewer in the
// window.
func NaiveRetriesInHang(sc Scenario, o Options) [3]int {
	var n [3]int
	interval := time.Second / time.Duration(o.RPS)
	offsets := NaiveRetryOffsets(sc, o.UserTimeout)
	for sent := time.Duration(0); sent < o.OutageLength; sent += interval {
		for h, hop := range offsets {
			for _, d := range hop {
				if sent+d < o.OutageLength {
					n[h]++
				}
			}
		}
	}
	return n
}

// RetrycapRetryBound is the most retries the retrycap arm's proxies can decide during a hang,
// per proxy (entry, gateway, order), whatever its length: a proxy decides a retry only while
// its breaker toward its upstream is closed (policy.Decide), after recording the failure
// (policy.Settle), so at most retrycapBreakerFailures-1 failures are retried before the one
// that opens it; while payment hangs the breaker never closes again (its half-open probe
// fails like every call). A proxy retries nothing when it has one attempt; the order proxy
// none either, since a hung payment only times out and the retrycap arm's --retry-on leaves
// timeouts out; nor a proxy whose per-try timeout's share a retry needs
// (policy.MinRetryShareNum/Den) is more than the entry's maxTime: no retry fits the deadline.
func RetrycapRetryBound(sc Scenario, maxTime time.Duration) [3]int {
	var n [3]int
	for h, pt := range retrycapPerTryTimeouts {
		switch {
		case sc.Attempts[h] < 2, h == len(n)-1:
		case maxTime < pt*policy.MinRetryShareNum/policy.MinRetryShareDen:
		default:
			n[h] = retrycapBreakerFailures - 1
		}
	}
	return n
}

// sum adds up a count per proxy.
func sum(v [3]int) int { return v[0] + v[1] + v[2] }
