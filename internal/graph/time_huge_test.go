package graph

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// hugeValues are the extremes a policy, the annotations and the meshes can declare, and past
// them: 499995h is the policy's longest duration (5 parts of 99999h), 2^31 Istio's attempts.
var (
	hugeTries = []int64{1, 2, 3, 100, 1 << 31, 1 << 62, math.MaxInt64}
	hugeDurs  = []time.Duration{0, 0, 1, time.Millisecond, 2 * time.Second, time.Hour, 499995 * time.Hour, 4 * 499995 * time.Hour, math.MaxInt64 - 1}
)

func hugeLayer(r *rand.Rand) TimeLayer {
	d := func() time.Duration { return hugeDurs[r.IntN(len(hugeDurs))] }
	return TimeLayer{Name: "l", Tries: hugeTries[r.IntN(len(hugeTries))], PerTry: d(), Timeout: d(), BackoffBase: d(), BackoffMax: d()}
}

var bigForever = big.NewInt(math.MaxInt64)

// bigLayer is a layer's time over x (nil: unknown, unbounded) in exact arithmetic; nil when
// unbounded.
func bigLayer(l TimeLayer, x *big.Int) *big.Int {
	try := x
	if l.PerTry > 0 && (try == nil || big.NewInt(int64(l.PerTry)).Cmp(try) < 0) {
		try = big.NewInt(int64(l.PerTry))
	}
	var y *big.Int
	if try != nil {
		y = new(big.Int).Mul(big.NewInt(max(l.Tries, 1)), try)
		y.Add(y, bigBackoff(l))
	}
	if l.Timeout > 0 && (y == nil || big.NewInt(int64(l.Timeout)).Cmp(y) < 0) {
		y = big.NewInt(int64(l.Timeout))
	}
	return y
}

// bigBackoff is the sum over retries n = 1..Tries-1 of min(max, base x 2^(n-1)), exactly (a
// sum past 2^63 is cut short there: it saturates anyway).
func bigBackoff(l TimeLayer) *big.Int {
	sum := new(big.Int)
	if l.BackoffBase <= 0 || l.Tries <= 1 {
		return sum
	}
	step := big.NewInt(int64(l.BackoffBase))
	for n := int64(1); n < l.Tries; n++ {
		if l.BackoffMax > 0 && step.Cmp(big.NewInt(int64(l.BackoffMax))) >= 0 {
			rest := new(big.Int).Mul(big.NewInt(l.Tries-n), big.NewInt(int64(l.BackoffMax)))
			return sum.Add(sum, rest)
		}
		sum.Add(sum, step)
		if sum.Cmp(bigForever) >= 0 {
			return sum
		}
		step = new(big.Int).Lsh(step, 1)
	}
	return sum
}

// saturate is the exact time as the model reports it: Forever from 2^63-1 on, and unbounded.
func saturate(x *big.Int) time.Duration {
	if x == nil || x.Cmp(bigForever) >= 0 {
		return Forever
	}
	return time.Duration(x.Int64())
}

// TestTimeHugeValues: chains of up to 100 hops whose layers take the extremes (2^31 and 2^62
// tries, 499995h per try, 1ns, no timeout) give exactly the exact arithmetic's time saturated at
// Forever, never a wrapped small figure; and the time is monotone in every input: raising any
// layer's tries, per-try timeout, timeout or backoff, removing a timeout, or raising the
// client's attempts never lowers it.
func TestTimeHugeValues(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 31))
	for iter := range 400 {
		n := 1 + r.IntN(100)
		if iter%4 != 0 {
			n = 1 + r.IntN(6)
		}
		hops := make([]Hop, n)
		for i := range hops {
			hops[i] = make(Hop, 1+r.IntN(2))
			for j := range hops[i] {
				hops[i][j] = hugeLayer(r)
			}
		}
		k := hugeTries[r.IntN(4)]
		time0, why := chainTime(hops, k)
		want, genuine := bigChain(hops, k)
		if time0 != want {
			t.Fatalf("iter %d: %d hops: %v, exact %v\n%+v", iter, n, FormatTime(time0), FormatTime(want), hops)
		}
		// The reason tells a missing timeout from a sum too long to count.
		if over := strings.HasPrefix(why, "the tries, per-try timeouts and backoff on "); time0 == Forever && over == genuine {
			t.Fatalf("iter %d: %d hops: unbounded (a timeout missing: %v) said %q\n%+v", iter, n, genuine, why, hops)
		}
		// Raise one field of one layer (or drop a timeout, or raise the client's attempts).
		i := r.IntN(n)
		j := r.IntN(len(hops[i]))
		up := clone(hops)
		l := &up[i][j]
		raise := func(d time.Duration) time.Duration {
			if d == 0 {
				return 0 // unset stays unset: setting a timeout may lower the time
			}
			return d + min(hugeDurs[r.IntN(len(hugeDurs))], math.MaxInt64-d)
		}
		k2 := k
		switch r.IntN(7) {
		case 0:
			l.Tries += min(hugeTries[r.IntN(len(hugeTries))], math.MaxInt64-l.Tries)
		case 1:
			l.PerTry = raise(l.PerTry)
		case 2:
			l.Timeout = raise(l.Timeout)
		case 3:
			l.BackoffBase = raise(l.BackoffBase)
		case 4:
			l.BackoffMax = raise(l.BackoffMax)
		case 5:
			l.PerTry, l.Timeout = 0, 0
		case 6:
			k2 = k + hugeTries[r.IntN(4)]
		}
		if got, _ := chainTime(up, k2); got < time0 {
			t.Fatalf("iter %d: raising hop %d layer %d (%+v -> %+v, client %d -> %d) lowered the time %v -> %v",
				iter, i, j, hops[i][j], up[i][j], k, k2, FormatTime(time0), FormatTime(got))
		}
	}
}

func clone(hops []Hop) []Hop {
	out := make([]Hop, len(hops))
	for i, h := range hops {
		out[i] = append(Hop(nil), h...)
	}
	return out
}

// chainTime builds s0 -> s1 -> ... -> sn with hops and the client's k attempts at s0, and
// returns the analysis's time and why it is unbounded.
func chainTime(hops []Hop, k int64) (time.Duration, string) {
	g := New()
	for i := range hops {
		g.AddEdge(name(i), name(i+1), 1, 1)
	}
	g.SetEntrypoint(name(0), k)
	for i, h := range hops {
		g.SetHop(name(i), name(i+1), h)
	}
	ta := AnalyzeTime(g, time.Hour)
	if len(ta.Chains) != 1 {
		panic("one entrypoint, one chain")
	}
	if ta.Worst == Forever && ta.WorstUnbounded == "" {
		panic("unbounded without a reason")
	}
	return ta.Worst, ta.WorstUnbounded
}

// bigChain is the chain's time in exact arithmetic, saturated; genuine when no timeout bounds
// it (not a sum too long to count).
func bigChain(hops []Hop, k int64) (time.Duration, bool) {
	var x *big.Int // the leaf's: unknown
	for i := len(hops) - 1; i >= 0; i-- {
		for j := len(hops[i]) - 1; j >= 0; j-- {
			x = bigLayer(hops[i][j], x)
		}
	}
	if x == nil {
		return Forever, true
	}
	return saturate(new(big.Int).Mul(big.NewInt(k), x)), false
}
