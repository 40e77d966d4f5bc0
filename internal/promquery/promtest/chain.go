package promtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/labapp"
)

// ChainConfig configures the lab's chain gateway -> order -> payment on loopback, payment always
// failing, with a real retrycap-proxy in front of gateway's calls (1 attempt) and of order's.
type ChainConfig struct {
	// ProxyBin is the retrycap-proxy binary.
	ProxyBin string
	// OrderAttempts are the attempts order's proxy makes per call to payment.
	OrderAttempts int
	// OrderAppTries is how often order's application calls payment per request it receives
	// while payment fails: 0 or 1 is the lab app (one call); more is an application that
	// retries by itself behind its proxy (each try a new call to the proxy).
	OrderAppTries int
	// Order and Payment are the names the callers use for their upstreams (the proxies'
	// --upstreams entries): "order" and "payment" when empty; "payment.billing" names a service
	// of another namespace, as in a ClusterRetryPolicy's graph.
	Order, Payment string
	// Labels are added to both proxies' series (namespace); GatewayLabels and OrderLabels to
	// one each, over Labels. The caller label "service" is always set (gateway, order).
	Labels, GatewayLabels, OrderLabels map[string]string
}

// Chain is a running chain.
type Chain struct {
	cfg              ChainConfig
	gatewayURL       string
	gateway, order   *labapp.ProxyProc
	sent             int
	gatewayTargetLbl map[string]string
	orderTargetLbl   map[string]string
}

// StartChain starts payment, order (the lab app or a retrying one), gateway and the two proxies;
// all of them stop at the test's cleanup.
func StartChain(t T, cfg ChainConfig) *Chain {
	t.Helper()
	if cfg.Order == "" {
		cfg.Order = "order"
	}
	if cfg.Payment == "" {
		cfg.Payment = "payment"
	}
	common := []string{"--chain-cap", "0", "--backoff-base", "1ms", "--backoff-max", "2ms",
		"--budget-percent", "100", "--budget-min-per-second", "10000", "--breaker-failures", "0"}
	startProxy := func(args ...string) *labapp.ProxyProc {
		p, err := labapp.StartProxy(cfg.ProxyBin, 10*time.Second, append(common, args...)...)
		if err != nil {
			t.Fatalf("%v", err)
		}
		t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
		return p
	}
	startApp := func(c labapp.Config) *labapp.App {
		a, err := labapp.Start(c)
		if err != nil {
			t.Fatalf("%v", err)
		}
		t.Cleanup(func() { _ = a.Close() })
		return a
	}
	payment := startApp(labapp.Config{Name: "payment"})
	payment.SetFailing(true)
	c := &Chain{cfg: cfg}
	c.order = startProxy("--service", "order", "--upstreams", fmt.Sprintf("%s=%d", cfg.Payment, cfg.OrderAttempts), "--resolve", cfg.Payment+"="+payment.Addr())
	var orderAddr string
	if cfg.OrderAppTries <= 1 {
		orderAddr = startApp(labapp.Config{Name: "order", Upstreams: []string{"http://" + cfg.Payment + "/charge"}, ProxyURL: c.order.URL()}).Addr()
	} else {
		orderAddr = startRetryingApp(t, "http://"+cfg.Payment+"/charge", c.order.URL(), cfg.OrderAppTries)
	}
	c.gateway = startProxy("--service", "gateway", "--upstreams", cfg.Order+"=1", "--resolve", cfg.Order+"="+orderAddr)
	c.gatewayURL = startApp(labapp.Config{Name: "gateway", Upstreams: []string{"http://" + cfg.Order + "/checkout"}, ProxyURL: c.gateway.URL()}).URL()
	c.gatewayTargetLbl = merge(cfg.Labels, cfg.GatewayLabels, map[string]string{"service": "gateway"})
	c.orderTargetLbl = merge(cfg.Labels, cfg.OrderLabels, map[string]string{"service": "order"})
	return c
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// startRetryingApp serves an application that, for every request, calls target through the
// proxy up to tries times while the answer is a 5xx: the retries of application code that the
// proxy sees as separate calls.
func startRetryingApp(t T, target, proxy string, tries int) string {
	t.Helper()
	pu, err := url.Parse(proxy)
	if err != nil {
		t.Fatalf("%v", err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusBadGateway
		for range tries {
			resp, err := client.Get(target)
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode < 500 {
				status = http.StatusOK
				break
			}
		}
		w.WriteHeader(status)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		client.CloseIdleConnections()
	})
	return ln.Addr().String()
}

// Targets are the two proxies' admin addresses with their labels, for StartTargets.
func (c *Chain) Targets() []Target {
	return []Target{{Addr: c.gateway.AdminAddr, Labels: c.gatewayTargetLbl}, {Addr: c.order.AdminAddr, Labels: c.orderTargetLbl}}
}

// Send sends n requests to gateway, one after the other.
func (c *Chain) Send(t T, n int) {
	t.Helper()
	for range n {
		resp, err := http.Get(c.gatewayURL + "/buy")
		if err != nil {
			t.Fatalf("%v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		c.sent++
	}
}

// attempts are what each proxy has sent so far, by admin address.
func (c *Chain) attempts() map[string]float64 {
	tries := max(c.cfg.OrderAppTries, 1)
	return map[string]float64{
		c.gateway.AdminAddr: float64(c.sent),
		c.order.AdminAddr:   float64(c.sent * tries * c.cfg.OrderAttempts),
	}
}

// MinSamples is how many samples of every series Settle waits for: increase() extrapolates a
// series that starts and ends inside the window by half its average sample interval at each
// end, a factor of 1 + 1/(samples-1) that differs between two targets by about
// (difference in samples)/samples^2, about 0.03 % here: ratios of two targets' counters (the
// calls per inbound request) come out exact to two decimals.
const MinSamples = 100

// Settle makes the chains' counters final in Prometheus, so that every ratio is exact: it waits
// until Prometheus has every proxy's last attempts and at least MinSamples samples of every
// series, stops the proxies, and waits until none was scraped for a second (its series end: a
// query later extrapolates their end by the same rule for all of them).
func Settle(t T, s *Server, chains ...*Chain) {
	t.Helper()
	c, err := api.NewClient(api.Config{Address: s.URL})
	if err != nil {
		t.Fatalf("%v", err)
	}
	prom := v1.NewAPI(c)
	want := map[string]float64{}
	for _, ch := range chains {
		for a, v := range ch.attempts() {
			want[a] = v
		}
	}
	poll(t, "every proxy's attempts and samples in Prometheus", func() (bool, string) {
		v, err := vector(prom, "sum by (instance) (retrycap_proxy_attempts_total)")
		if err != nil {
			return false, err.Error()
		}
		got := map[string]float64{}
		for _, smp := range v {
			got[string(smp.Metric["instance"])] = float64(smp.Value)
		}
		for a, w := range want {
			if got[a] != w {
				return false, fmt.Sprintf("attempts %v, want %v", got, want)
			}
		}
		n, err := vector(prom, "min(count_over_time(retrycap_proxy_requests_total[10m]))")
		if err != nil || len(n) != 1 || float64(n[0].Value) < MinSamples {
			return false, fmt.Sprintf("samples %v %v", n, err)
		}
		return true, ""
	})
	for _, ch := range chains {
		for _, p := range []*labapp.ProxyProc{ch.gateway, ch.order} {
			if err := p.Stop(5 * time.Second); err != nil {
				t.Fatalf("stopping the proxy at %s: %v", p.Addr, err)
			}
		}
	}
	// No successful scrape of any proxy in the last second: every series' last sample is more
	// than 1.1 sample intervals before any later query (increase() then extrapolates its end by
	// half an interval, as it does its start). Failed scrapes before the stop do not count.
	poll(t, "no successful scrape of the stopped proxies for a second", func() (bool, string) {
		v, err := vector(prom, "max(max_over_time(up[1s]))")
		if err != nil || len(v) != 1 || float64(v[0].Value) != 0 {
			return false, fmt.Sprintf("%v %v", v, err)
		}
		return true, ""
	})
}

func vector(prom v1.API, q string) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	val, _, _, err := prom.Query(ctx, q, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	v, ok := val.(model.Vector)
	if !ok {
		return nil, errors.New("query " + q + ": not a vector")
	}
	return v, nil
}

// poll checks cond every 50 ms for at most 60 s.
func poll(t T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60s (last: %s)", what, why)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}
