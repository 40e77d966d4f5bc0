package storm

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Scenario is a preset chain: the edge client's attempts, the attempts of
// each hop (entry proxy -> gateway, gateway -> order, order -> payment) and
// the chain cap of the retrycap arm.
type Scenario struct {
	Name        string
	Description string
	// ClientAttempts is how many attempts the edge client makes per user
	// request. With more than one, it sends an Idempotency-Key (the one the
	// entry proxy returns, for a POST it sent without) so the entry proxy
	// charges the client's retry against the chain.
	ClientAttempts int
	// Attempts per hop: entry proxy to gateway, gateway to order, order to payment.
	Attempts [3]int
	// ChainCap is the retrycap arm's maxAmplification.
	ChainCap int
}

// Amplification is the naive worst case at payment: client attempts times
// every hop's attempts.
func (s Scenario) Amplification() int {
	n := s.ClientAttempts
	for _, a := range s.Attempts {
		n *= a
	}
	return n
}

// Chain renders the scenario's chain, e.g.
// "client x1 -> gateway x3 -> order x3 -> payment x3 = 27".
func (s Scenario) Chain() string {
	return fmt.Sprintf("client x%d -> gateway x%d -> order x%d -> payment x%d = %d",
		s.ClientAttempts, s.Attempts[0], s.Attempts[1], s.Attempts[2], s.Amplification())
}

// Outages: how payment goes down (Options.Outage).
const (
	OutageKill = "kill" // killed: connections refused, then restarted on the same address
	OutageHang = "hang" // hung: requests accepted and read, none answered until restored
)

// Scenarios are the presets reproducing the two incident write-ups.
var Scenarios = map[string]Scenario{
	"storm27": {
		Name:        "storm27",
		Description: "three tiers with 3 attempts each: 27 requests at payment for one user request; cap 4",
		// The edge client does not retry; its sidecar (the entry proxy) makes 3 attempts to gateway.
		ClientAttempts: 1, Attempts: [3]int{3, 3, 3}, ChainCap: 4,
	},
	"incident18": {
		Name: "incident18",
		Description: "browser 2 attempts x gateway 3 x service 3: 18 requests at the database (payment here) " +
			"for one click; cap 3",
		// The browser retries itself; its entry proxy forwards once.
		ClientAttempts: 2, Attempts: [3]int{1, 3, 3}, ChainCap: 3,
	},
}

// ScenarioNames lists the presets, sorted.
func ScenarioNames() []string {
	var out []string
	for n := range Scenarios {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Options configure a lab run. Zero fields take the values of Defaults.
type Options struct {
	// Scenario is a key of Scenarios; default "storm27".
	Scenario string
	// Protocol is the chain's protocol: ProtocolHTTP (default) or
	// ProtocolGRPC (every hop a gRPC call through the proxies' h2c path).
	Protocol string
	// Duration is how long each arm's load runs.
	Duration time.Duration
	// OutageStart is when payment is killed, after the load began.
	OutageStart time.Duration
	// OutageLength is how long payment stays down.
	OutageLength time.Duration
	// Outage is how payment goes down: OutageHang (default: it accepts and reads requests but
	// answers none, the callers' timeouts add up: the second write-up's spinner) or OutageKill
	// (a crash: connections refused, every attempt fails at once).
	Outage string
	// RPS is the open-loop load, user requests per second.
	RPS int
	// Capacity is what payment can serve, requests per second
	// (Capacity x Work workers).
	Capacity int
	// Work is how long one request occupies a payment worker.
	Work time.Duration
	// UserTimeout is how long the edge client waits for one user request,
	// its own retries included, before it gives up (a failure).
	UserTimeout time.Duration
	// MaxTimeToAnswer is the retrycap arm's entrypoint maxTimeToAnswer: its entry proxy's
	// --max-time-to-answer, which every proxy below carries as Retrycap-Deadline. Default: a
	// tenth under UserTimeout (defaultMaxTimeToAnswer), so that the answer, a 504 when the time
	// is gone, reaches the user before it gives up. The naive arm has none.
	MaxTimeToAnswer time.Duration
	// ProxyBinary is the retrycap-proxy to run; empty builds
	// ./cmd/retrycap-proxy from the repository the working directory is in.
	ProxyBinary string
	// Out receives progress notes (which arm runs, where the chart went); nil discards.
	Out io.Writer
	// Progress receives a live progress line (carriage returns; give it a
	// terminal); nil shows none.
	Progress io.Writer
	// ChartPath is where the SVG chart is written; empty writes none.
	ChartPath string
	// AccessLogDir is where the proxies write their access logs
	// (ARM/SERVICE.log, read back by observe for each arm's summary); empty:
	// a temporary directory, removed after the run.
	AccessLogDir string
}

// Defaults is the full lab: each arm 50 s at 50 user requests/s against a
// payment that serves 100 requests/s, hung from 5 s to 25 s, so 25 s are
// left to see whether each arm recovers. Both arms take about 2 minutes.
//
// The outage is a hang (OutageHang): payment accepts and reads every
// request and answers none, a stuck database or pod, the second write-up's
// "payment service which does not answer". A crash (OutageKill) refuses
// connections, every attempt fails at once and even the naive chain answers
// in about 4 s; under a hang every attempt waits out its per-try timeout and
// the naive chain's time is theirs added up: 12.3 s (order: 3 x 500 ms + 300
// ms of backoff = 1.8 s; gateway: 3 x 1.8 s + 0.3 s = 5.7 s, cut at the
// entry's 4 s; entry: 3 x 4 s + 0.3 s = 12.3 s), longer than the user waits.
// The naive tiers go on for up to 14 s after a user request was sent (the
// entry's third attempt starts at 8.2 s and the gateway's work under it runs
// its 5.7 s, whoever still waits): the last user request of a 20 s hang has
// its work done by about 39 s of the 50 s load, so every request at payment
// of every failed user request of the outage is counted (PerFailedExact)
// before the arm's chain is closed.
//
// The user's timeout, 10 s, is an app's HTTP client's default: OkHttp's
// (Android's common client) connect, read and write timeouts are 10 s each,
// so a server that sends nothing is given up after 10 s; a browser waits
// longer, its user seldom does.
func Defaults() Options {
	return Options{
		Scenario:     "storm27",
		Duration:     50 * time.Second,
		OutageStart:  5 * time.Second,
		OutageLength: 20 * time.Second,
		Outage:       OutageHang,
		RPS:          50,
		Capacity:     100,
		Work:         50 * time.Millisecond,
		UserTimeout:  10 * time.Second,
	}
}

// Short is the lab in about 45 s for both arms (the demo's --short): a 5 s outage in a 16 s
// run, the user's timeout 3 s, 9 s after the restore as before (the naive arm still stays
// down after payment returns). The outage is as short as the retries target allows
// (docs/storm-lab.md): the retrycap arm's retries during a hang do not grow with it (the
// breakers open and stay open: RetrycapRetryBound, 49 here, all at the gateway proxy: the
// entry's 2.7 s deadline is under half its 6 s per-try timeout and no retry fits), the naive
// arm's do (NaiveRetriesInHang: 905 by construction in 5 s, 310 in the 3 s this preset had,
// where 32 of the retrycap arm's were 92 % fewer, under the target). 4 s gives 575, and 49 is
// 8.5 % of it; 5 s is the first whole second at which 49 is under 6 %.
func Short() Options {
	o := Defaults()
	o.Duration = 16 * time.Second
	o.OutageStart = 2 * time.Second
	o.OutageLength = 5 * time.Second
	o.UserTimeout = 3 * time.Second
	return o
}

// maxCapacity bounds --capacity: 50 times the most --rps, more than any scenario's amplification
// brings to payment.
const maxCapacity = 100000

// withDefaults fills zero fields from Defaults and validates the result.
func (o Options) withDefaults() (Options, Scenario, error) {
	d := Defaults()
	if o.Scenario == "" {
		o.Scenario = d.Scenario
	}
	if o.Protocol == "" {
		o.Protocol = ProtocolHTTP
	}
	if o.Outage == "" {
		o.Outage = d.Outage
	}
	if o.Duration == 0 {
		o.Duration = d.Duration
	}
	if o.OutageStart == 0 {
		o.OutageStart = d.OutageStart
	}
	if o.OutageLength == 0 {
		o.OutageLength = d.OutageLength
	}
	if o.RPS == 0 {
		o.RPS = d.RPS
	}
	if o.Capacity == 0 {
		o.Capacity = d.Capacity
	}
	if o.Work == 0 {
		o.Work = d.Work
	}
	if o.UserTimeout == 0 {
		o.UserTimeout = d.UserTimeout
	}
	if o.MaxTimeToAnswer == 0 {
		o.MaxTimeToAnswer = defaultMaxTimeToAnswer(o.UserTimeout)
	}
	sc, ok := Scenarios[o.Scenario]
	if !ok {
		return o, sc, fmt.Errorf("storm: scenario %q: unknown, want one of %s", o.Scenario, strings.Join(ScenarioNames(), ", "))
	}
	switch {
	case o.Protocol != ProtocolHTTP && o.Protocol != ProtocolGRPC:
		return o, sc, fmt.Errorf("storm: protocol %q: unknown, want %s or %s", o.Protocol, ProtocolHTTP, ProtocolGRPC)
	case o.Outage != OutageKill && o.Outage != OutageHang:
		return o, sc, fmt.Errorf("storm: outage %q: unknown, want %s or %s", o.Outage, OutageKill, OutageHang)
	case o.RPS < 1 || o.RPS > 2000:
		return o, sc, fmt.Errorf("storm: rps %d: want 1..2000", o.RPS)
	case o.Capacity < 1:
		return o, sc, fmt.Errorf("storm: capacity %d: want >= 1 request/s", o.Capacity)
	case o.Capacity > maxCapacity:
		// The queue has Capacity slots and Capacity x Work workers are started.
		return o, sc, fmt.Errorf("storm: capacity %d: want 1..%d requests/s", o.Capacity, maxCapacity)
	case o.Work <= 0 || o.Work > 10*time.Second:
		return o, sc, fmt.Errorf("storm: work %s: want > 0 and <= 10s", o.Work)
	case o.Duration < 0 || o.OutageStart < 0 || o.OutageLength < 0 || o.UserTimeout < 0:
		return o, sc, fmt.Errorf("storm: durations must be positive (duration %s, outage start %s, outage length %s, user timeout %s)",
			o.Duration, o.OutageStart, o.OutageLength, o.UserTimeout)
	case o.Duration > maxLabDuration || o.OutageStart > maxLabDuration || o.OutageLength > maxLabDuration || o.UserTimeout > maxLabDuration:
		// A lab run of hours is a unit typed wrong; the bound also keeps the sum below (outage
		// start + length + recovery) from wrapping: 2^62 + 2^62 passed it as a negative time.
		return o, sc, fmt.Errorf("storm: durations must be at most %s (duration %s, outage start %s, outage length %s, user timeout %s)",
			maxLabDuration, o.Duration, o.OutageStart, o.OutageLength, o.UserTimeout)
	case o.MaxTimeToAnswer < time.Millisecond || o.MaxTimeToAnswer > o.UserTimeout:
		// Over the user's timeout the deadline could not keep work from outliving the user.
		return o, sc, fmt.Errorf("storm: max time to answer %s: want 1ms..the user timeout (%s)", o.MaxTimeToAnswer, o.UserTimeout)
	case o.OutageStart+o.OutageLength+time.Duration(DefaultRecovery.Windows)*DefaultRecovery.Window > o.Duration:
		return o, sc, fmt.Errorf("storm: duration %s: must leave at least %s after the outage (%s + %s) to judge recovery",
			o.Duration, time.Duration(DefaultRecovery.Windows)*DefaultRecovery.Window, o.OutageStart, o.OutageLength)
	}
	if w := o.workers(); w < 1 {
		return o, sc, fmt.Errorf("storm: capacity %d req/s x work %s = %.2f workers: want at least 1", o.Capacity, o.Work, float64(o.Capacity)*o.Work.Seconds())
	}
	return o, sc, nil
}

// maxLabDuration bounds each of the lab's durations (--duration, --outage-start,
// --outage-length, --user-timeout).
const maxLabDuration = time.Hour

// defaultMaxTimeToAnswer is the retrycap arm's maxTimeToAnswer for a user timeout: a tenth
// under it (at least 1 ms), the margin for the answer to travel back to the user and for the
// time between the user's start and the entry proxy's: a deadline equal to the user's timeout
// would let the entry proxy start an attempt in the moment after the user gave up.
func defaultMaxTimeToAnswer(userTimeout time.Duration) time.Duration {
	return max(userTimeout-userTimeout/10, time.Millisecond)
}

// workers is payment's concurrency: Capacity x Work, rounded.
func (o Options) workers() int {
	return int(float64(o.Capacity)*o.Work.Seconds() + 0.5)
}

// queue is how many requests may wait at payment: one second of work.
func (o Options) queue() int { return o.Capacity }
