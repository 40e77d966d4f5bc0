package storm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/retrycap/retrycap/internal/labapp"
)

// One arm's chain, bottom-up:
//
//	edge client -> [entry proxy] -> gateway app -> [gateway proxy] -> order app -> [order proxy] -> payment
//
// The edge client is the user (in process, open-loop); the entry proxy is
// its sidecar. Every proxy is a real retrycap-proxy process; the apps are
// labapp chain apps propagating Retrycap-Budget and baggage.

// Arm names.
const (
	ArmNaive    = "naive"
	ArmRetrycap = "retrycap"
)

// Protocols of the lab's chain (Options.Protocol).
const (
	ProtocolHTTP = "http"
	// ProtocolGRPC: every hop is a gRPC call (retrycap.lab.Chain, labapp):
	// the edge client and the apps reach their proxies with CONNECT, as
	// grpc-go does with HTTPS_PROXY, and the proxies terminate the h2c.
	ProtocolGRPC = "grpc"
)

// grpcPort is the port of the names the gRPC chain calls (gateway:50051):
// the proxies' --resolve maps each name to its app, whatever the port.
const grpcPort = "50051"

// perTryTimeouts per hop (entry->gateway, gateway->order, order->payment):
// 10x payment's service time at the bottom (room for a shared, busy
// machine), and each hop above a little more than the call below takes
// when its attempts fail fast, as a team tuning its own timeouts would.
// Payment's queue holds a second of work, longer than 500 ms: once it is
// full, every queued request is stale by the time it is served.
//
// The naive arm runs them as they are, with their timeout inversion: when
// payment hangs, the gateway's worst time is 3 x 1.8 s + 0.3 s = 5.7 s (order:
// 3 x 500 ms + 0.3 s), longer than the entry's 4 s, so the entry gives up on
// a gateway attempt that is still working and starts another. retrycap
// reports that inversion with its fix, a per-try timeout covering the
// callee's worst time (docs/concepts.md), and the retrycap arm runs with the
// fix applied: 6 s at the entry (retrycapPerTryTimeouts). Without it the
// entry would cut gateway attempts that could still answer and retry them,
// and a cut attempt would leave its gateway working under a deadline that
// outlives the user's answer (a proxy forwards the request's time left, not
// the attempt's: docs/decisions.md).
func perTryTimeouts(arm string) [3]time.Duration {
	if arm == ArmRetrycap {
		return retrycapPerTryTimeouts
	}
	return naivePerTryTimeouts
}

var (
	naivePerTryTimeouts    = [3]time.Duration{4 * time.Second, 2 * time.Second, 500 * time.Millisecond}
	retrycapPerTryTimeouts = [3]time.Duration{6 * time.Second, 2 * time.Second, 500 * time.Millisecond}
)

var hopNames = [3]struct{ service, upstream string }{
	{"client", "gateway"}, {"gateway", "order"}, {"order", "payment"},
}

// Backoff shared by both arms, the design's defaults: base 100 ms, max 2
// s. The naive arm waits exactly base x 2^(n-1); the retrycap arm draws
// uniformly below it. With it a naive user request keeps retrying for
// about 4 s while payment is down, so a few seconds of users are still
// retrying when it returns: enough concurrent attempts to fill payment's
// queue past the 500 ms timeout at once, which is what tips it into the
// metastable state (5 workers x 500 ms / 50 ms = 50 concurrent requests).
const (
	backoffBase = 100 * time.Millisecond
	backoffMax  = 2 * time.Second
)

// retrycapBreakerFailures is the retrycap arm's --breaker-failures: failures in its 10 s window
// that open a proxy's breaker toward its upstream (the design's 50).
const retrycapBreakerFailures = 50

// naiveRetryOn is the naive arm's --retry-on: Envoy's `5xx` retry policy (x-envoy-retry-on
// "5xx": a retry on any 5xx answer or when the upstream "does not respond at all
// (disconnect/reset/read timeout)", connect failures included), the policy the write-ups'
// teams set on their routes, plus gRPC's UNAVAILABLE for the gRPC chain. Envoy retries an
// attempt cut by its per-try timeout under it (a per-try timeout answers 504, a 5xx); the
// proxy's own default (and the retrycap arm's) leaves timeout out, since a request that timed
// out may have been executed. Under a hung payment this is what makes the naive tiers retry
// for seconds, each attempt waiting out its per-try timeout.
const naiveRetryOn = "connect-failure,reset,timeout,5xx,unavailable"

// proxyArgs is the command line of hop i's proxy (0: entry, 1: gateway,
// 2: order), without --resolve.
//
// naive: the mesh-without-retrycap every team configures for itself:
// attempts per hop, no chain cap, backoff without jitter, no retry budget
// (100 % and a floor no load reaches), no breaker, POST/PATCH retried
// like any method (as Istio's default retries do on 503), and retried on
// what Envoy's `5xx` retry policy retries (naiveRetryOn): any 5xx, a reset,
// a failed connect, and a per-try timeout.
//
// retrycap: the same declared attempts, the chain cap, the design's retry
// budget (20 %, 10/s, 10 s), a breaker (50 failures in 10 s) that opens for
// 500 ms (the design's 10 s is for incidents that last 40 minutes; the lab's
// time scale is seconds), full jitter, POST/PATCH retried only with an
// Idempotency-Key, and the entry proxy marked --entrypoint with the
// entrypoint's maxTimeToAnswer (--max-time-to-answer, when maxTime > 0): it
// sets Retrycap-Deadline, which the apps propagate in baggage and every
// proxy below reads, so no tier starts an attempt once the user's time is
// gone.
func proxyArgs(sc Scenario, arm string, i int, maxTime time.Duration) []string {
	h := hopNames[i]
	args := []string{
		"--service", h.service,
		"--upstreams", fmt.Sprintf("%s=%d", h.upstream, sc.Attempts[i]),
		"--per-try-timeout", perTryTimeouts(arm)[i].String(),
		"--backoff-base", backoffBase.String(), "--backoff-max", backoffMax.String(),
	}
	if arm == ArmNaive {
		return append(args,
			"--chain-cap", "0", "--backoff-jitter=false",
			"--budget-percent", "100", "--budget-min-per-second", "1000000",
			"--breaker-failures", "0",
			"--retry-methods", "GET,HEAD,OPTIONS,PUT,DELETE,POST,PATCH",
			"--retry-on", naiveRetryOn)
	}
	args = append(args,
		"--chain-cap", strconv.Itoa(sc.ChainCap), "--backoff-jitter=true",
		"--budget-percent", "20", "--budget-min-per-second", "10", "--budget-window", "10s",
		"--breaker-failures", strconv.Itoa(retrycapBreakerFailures), "--breaker-window", "10s", "--breaker-open-for", "500ms")
	if i == 0 {
		args = append(args, "--entrypoint")
		if maxTime > 0 {
			args = append(args, "--max-time-to-answer", maxTime.String())
		}
	}
	return args
}

// chain is one arm's running chain.
type chain struct {
	arm      string
	proto    string
	sc       Scenario
	payment  *Payment
	apps     []*labapp.App
	proxies  [3]*labapp.ProxyProc // entry, gateway, order
	edge     *http.Client
	scrapeHC *http.Client
	// The gRPC chain: its apps (child processes) and the edge client.
	gapps []*labapp.GRPCProc
	gedge *grpc.ClientConn
	// clientRetries counts the edge client's own retries.
	clientRetries atomic.Int64
	// arrived records the requests payment, and the HTTP chain's apps, received.
	arrived arrivals
}

// arrivals records when each tier received a request of which user operation: what the
// tiers really saw, for the orphaned attempts (OrphanedAttempts).
type arrivals struct {
	mu   sync.Mutex
	list []arrival
}

type arrival struct {
	tier, op string
	at       time.Time
}

func (a *arrivals) record(tier, op string) {
	now := time.Now()
	a.mu.Lock()
	a.list = append(a.list, arrival{tier, op, now})
	a.mu.Unlock()
}

// since is what was recorded, as tier attempts timed from start (monotonic clock).
func (a *arrivals) since(start time.Time) []TierAttempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]TierAttempt, len(a.list))
	for i, x := range a.list {
		out[i] = TierAttempt{Tier: x.tier, Op: x.op, At: x.at.Sub(start)}
	}
	return out
}

// startChainProto starts payment, then each app and proxy bottom-up (a proxy
// must know the address of the app it resolves to), for either protocol,
// the retrycap arm's entry proxy with maxTime (proxyArgs; 0: none);
// extra(i), if not nil, is appended to hop i's proxy's flags (later flags
// win: the tests set their per-try timeouts and the h2 engine so).
// With logDir set, each proxy writes its access log to logDir/ARM/SERVICE.log
// (AccessLogPaths). The gRPC chain's
// apps are child processes (labapp.StartGRPCProcess), each with
// HTTPS_PROXY set to its own proxy as the injector sets it; the edge client
// (the user, in this process) opens its CONNECT itself, since grpc-go
// reads HTTPS_PROXY once per process and each arm has its own entry proxy.
func startChainProto(bin, arm, proto string, sc Scenario, maxTime time.Duration, pc PaymentConfig, logDir string, extra func(hop int) []string) (c *chain, err error) {
	c = &chain{arm: arm, proto: proto, sc: sc, scrapeHC: &http.Client{Timeout: 5 * time.Second}}
	pc.GRPC = proto == ProtocolGRPC
	pc.Arrived = func(op string) { c.arrived.record(hopNames[2].upstream, op) }
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if logDir != "" {
		if err := os.MkdirAll(filepath.Join(logDir, arm), 0o755); err != nil {
			return c, fmt.Errorf("%s arm: access-log directory: %w", arm, err)
		}
	}
	if c.payment, err = StartPayment(pc); err != nil {
		return c, err
	}
	next := c.payment.Addr()
	for i := 2; i >= 0; i-- {
		h := hopNames[i]
		args := append(proxyArgs(sc, arm, i, maxTime), "--resolve", h.upstream+"="+next)
		if extra != nil {
			args = append(args, extra(i)...)
		}
		if logDir != "" {
			args = append(args, "--access-log", accessLogPath(logDir, arm, i))
		}
		p, err := labapp.StartProxy(bin, 10*time.Second, args...)
		if err != nil {
			return c, fmt.Errorf("%s arm: %s proxy: %w", arm, h.service, err)
		}
		c.proxies[i] = p
		if i == 0 {
			break
		}
		if proto == ProtocolGRPC {
			app, err := labapp.StartGRPCProcess(labapp.GRPCConfig{
				Name: h.service, Upstream: h.upstream + ":" + grpcPort, Timeout: 30 * time.Second,
			}, p.URL(), 20*time.Second)
			if err != nil {
				return c, fmt.Errorf("%s arm: %w", arm, err)
			}
			c.gapps = append(c.gapps, app)
			next = app.Addr
			continue
		}
		tier := h.service
		app, err := labapp.Start(labapp.Config{
			Name: h.service, Upstreams: []string{"http://" + h.upstream + "/" + h.upstream},
			ProxyURL: p.URL(), Propagation: labapp.PropagateBoth, Timeout: 30 * time.Second,
			// Both arms' apps are the common server: a caller hanging up does not stop the
			// calls it started (labapp.Config.KeepCallsWhenCallerGone), so the work below a
			// user who gave up, or below an attempt its proxy cut, goes on: only a deadline
			// the proxies read (the retrycap arm's) bounds it.
			KeepCallsWhenCallerGone: true,
			OnRequest:               func(r *http.Request) { c.arrived.record(tier, opOf(r.Header.Values("Baggage"))) },
		})
		if err != nil {
			return c, fmt.Errorf("%s arm: %w", arm, err)
		}
		c.apps = append(c.apps, app)
		next = app.Addr()
	}
	if proto == ProtocolGRPC {
		entry := c.proxies[0].Addr
		c.gedge, err = grpc.NewClient("passthrough:///"+hopNames[0].upstream+":"+grpcPort,
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry(),
			grpc.WithContextDialer(func(ctx context.Context, target string) (net.Conn, error) {
				return dialConnect(ctx, entry, target)
			}))
		if err != nil {
			return c, fmt.Errorf("%s arm: edge gRPC client: %w", arm, err)
		}
		return c, nil
	}
	u, err := url.Parse(c.proxies[0].URL())
	if err != nil {
		return c, fmt.Errorf("%s arm: entry proxy URL: %w", arm, err)
	}
	c.edge = &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(u), MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second,
	}}
	return c, nil
}

// close stops everything; proxies get SIGTERM and a short drain (which
// flushes their access logs). Closing twice is closing once.
func (c *chain) close() {
	for i, p := range c.proxies {
		if p != nil {
			if err := p.Stop(3 * time.Second); err != nil {
				_ = p.Kill()
			}
			c.proxies[i] = nil
		}
	}
	for _, a := range c.apps {
		_ = a.Close()
	}
	c.apps = nil
	for _, a := range c.gapps {
		a.Stop(3 * time.Second)
	}
	c.gapps = nil
	if c.gedge != nil {
		_ = c.gedge.Close()
		c.gedge = nil
	}
	if c.payment != nil {
		c.payment.Close()
		c.payment = nil
	}
	if c.edge != nil {
		c.edge.CloseIdleConnections()
	}
}

// userSpec is one user request of the load.
type userSpec struct {
	method string
	key    string // Idempotency-Key sent on the first attempt, "" for none
	op     string // the user operation id (baggage storm-op)
}

// loadMix is user request i of the load, the same in both arms: 3 in 5
// GET, 1 in 5 POST with an Idempotency-Key, 1 in 5 POST without. A client
// that retries (ClientAttempts > 1) sends a key with its GETs too, so the
// entry proxy can charge its retry against the chain.
func loadMix(i int, sc Scenario) userSpec {
	u := userSpec{method: http.MethodGet, op: strconv.Itoa(i)}
	switch i % 5 {
	case 3:
		u.method, u.key = http.MethodPost, "key-"+u.op
	case 4:
		u.method = http.MethodPost
	default:
		if sc.ClientAttempts > 1 {
			u.key = "key-" + u.op
		}
	}
	return u
}

// clientBackoff is the edge client's wait before its own retry.
const clientBackoff = 100 * time.Millisecond

// userRequest runs one user request with the edge client's attempts and
// reports whether it succeeded and how many attempts it made. A POST sent
// without a key is retried with the key the entry proxy returned, if any
// (the retrycap arm's entry proxy returns one), else without (a naive
// browser resubmitting).
func (c *chain) userRequest(ctx context.Context, u userSpec) (ok bool, attempts int) {
	key := u.key
	for attempts = 1; ; attempts++ {
		status, returnedKey, err := c.attempt(ctx, u, key)
		if err == nil && status < 300 {
			return true, attempts
		}
		retryable := err != nil || status >= 500
		if !retryable || attempts >= c.sc.ClientAttempts || ctx.Err() != nil {
			return false, attempts
		}
		if key == "" && returnedKey != "" {
			key = returnedKey
		}
		c.clientRetries.Add(1)
		select {
		case <-time.After(clientBackoff):
		case <-ctx.Done():
			return false, attempts
		}
	}
}

func (c *chain) attempt(ctx context.Context, u userSpec, key string) (status int, returnedKey string, err error) {
	if c.proto == ProtocolGRPC {
		return c.attemptGRPC(ctx, u, key), "", nil
	}
	req, err := http.NewRequestWithContext(ctx, u.method, "http://gateway/buy", nil)
	if err != nil {
		return 0, "", fmt.Errorf("user request %s: %w", u.op, err)
	}
	req.Header.Set("Baggage", opBaggageKey+"="+u.op)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.edge.Do(req)
	if err != nil {
		return 0, "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Idempotency-Key"), nil
}

// counters reads the cumulative counters of a Sample from the proxies'
// /metrics: attempts the order proxy sent to payment, and the retries every
// proxy sent to its upstream, in all and per proxy (entry, gateway, order). The edge client's own retries are counted
// apart (clientRetries): with retrycap the entry proxy refuses them when
// the key's chain budget is spent, so they do not all reach a service.
func (c *chain) counters(ctx context.Context) (payment, retries float64, byHop [3]float64, err error) {
	for i, p := range c.proxies {
		m, err := c.scrape(ctx, p)
		if err != nil {
			return 0, 0, byHop, err
		}
		up := hopNames[i].upstream
		byHop[i] = m[c.series("retries")][up]
		retries += byHop[i]
		if i == 2 {
			payment = m[c.series("attempts")][up]
		}
	}
	return payment, retries, byHop, nil
}

// scrape fetches the two counters the lab reads, by name and upstream.
func (c *chain) scrape(ctx context.Context, p *labapp.ProxyProc) (map[string]map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.AdminAddr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", p.AdminAddr, err)
	}
	resp, err := c.scrapeHC.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", p.AdminAddr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// An error page read as an exposition would give zeros: a storm that never happened.
		return nil, fmt.Errorf("metrics of %s: HTTP %d, not the proxy's metrics", p.AdminAddr, resp.StatusCode)
	}
	m, err := parseCounters(resp.Body, c.series("attempts"), c.series("retries"))
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", p.AdminAddr, err)
	}
	return m, nil
}

// series is the proxies' counter of attempts or retries for the chain's
// protocol: the HTTP/1.1 path's, or the h2c path's (its protocol label
// "grpc", summed over by parseCounters).
func (c *chain) series(what string) string {
	if c.proto == ProtocolGRPC {
		return "retrycap_proxy_h2_" + what + "_total"
	}
	return "retrycap_proxy_" + what + "_total"
}

// errNotCounts is a scrape whose counters are not counts: not a slow machine's missed sample
// but a broken reading, which ends the run rather than being passed over.
type errNotCounts struct{ err error }

func (e errNotCounts) Error() string { return e.err.Error() }
func (e errNotCounts) Unwrap() error { return e.err }

// parseCounters reads the named counters of a Prometheus text exposition (prometheus/common's
// parser), summed by their upstream label over the others (code, protocol). A raw counter
// counts requests: a value that is NaN, infinite, negative or not a whole number, a series of
// a named family without an upstream label, a series given twice with different values (the
// same value twice is taken once, as Prometheus takes a sample appended twice), a family of
// another type and an exposition without any metric are errors (errNotCounts) naming the
// series and the value. A family the proxy has not exported yet (no request in it) is 0.
func parseCounters(r io.Reader, names ...string) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for _, n := range names {
		out[n] = map[string]float64{}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, errNotCounts{fmt.Errorf("not a text exposition: %w", err)}
	}
	if len(fams) == 0 {
		return nil, errNotCounts{errors.New("nothing was read: the exposition holds no metric")}
	}
	for _, n := range names {
		f := fams[n]
		if f == nil {
			continue
		}
		if f.GetType() != dto.MetricType_COUNTER && f.GetType() != dto.MetricType_UNTYPED {
			return nil, errNotCounts{fmt.Errorf("%s is a %s, not a counter", n, strings.ToLower(f.GetType().String()))}
		}
		seen := map[string]float64{}
		for _, m := range f.GetMetric() {
			ls := model.LabelSet{}
			for _, l := range m.GetLabel() {
				ls[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
			}
			series := n + ls.String()
			v := m.GetCounter().GetValue()
			if f.GetType() == dto.MetricType_UNTYPED {
				v = m.GetUntyped().GetValue()
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v != math.Trunc(v) || v > 1<<53 {
				return nil, errNotCounts{fmt.Errorf("%s: value %s is not a count of requests (want a whole number from 0 to 2^53)", series, strconv.FormatFloat(v, 'g', -1, 64))}
			}
			up, ok := ls["upstream"]
			if !ok {
				return nil, errNotCounts{fmt.Errorf("%s: no upstream label", series)}
			}
			if prev, dup := seen[series]; dup {
				if prev != v {
					return nil, errNotCounts{fmt.Errorf("%s: given twice, with values %s and %s", series, strconv.FormatFloat(prev, 'g', -1, 64), strconv.FormatFloat(v, 'g', -1, 64))}
				}
				continue
			}
			seen[series] = v
			out[n][string(up)] += v
		}
	}
	return out, nil
}
