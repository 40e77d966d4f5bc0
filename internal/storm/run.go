package storm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/labapp"
)

// Result is a lab run: the options it ran with (defaults filled in), the
// scenario, both arms' figures and the targets.
type Result struct {
	Options  Options
	Scenario Scenario
	// Timeline is the fault as it happened (measured, relative to the
	// start of each arm's load; the arms agree within milliseconds).
	Timeline Timeline
	Naive    ArmResult
	Retrycap ArmResult
	Targets  []Target
	// ChartPath is where the chart was written, "" if none.
	ChartPath string
	// logsRemoved: the access logs were in a temporary directory, gone
	// once Run returns.
	logsRemoved bool
}

// Passed reports whether the retrycap arm met every target.
func (r *Result) Passed() bool {
	for _, t := range r.Targets {
		if !t.Met {
			return false
		}
	}
	return len(r.Targets) > 0
}

// sampleEvery is how often the counters are read.
const sampleEvery = 250 * time.Millisecond

// Run runs both arms on the same load, one after the other, and judges
// the retrycap arm. It needs a retrycap-proxy: o.ProxyBinary, or one found
// by findProxy.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, sc, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	bin := o.ProxyBinary
	if bin == "" {
		dir, err := os.MkdirTemp("", "retrycap-storm")
		if err != nil {
			return nil, fmt.Errorf("storm: temp dir for the proxy binary: %w", err)
		}
		defer os.RemoveAll(dir)
		if bin, err = findProxy(dir); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("storm: proxy binary %q: %w", bin, err)
	}
	removeLogs := false
	if o.AccessLogDir == "" {
		dir, err := os.MkdirTemp("", "retrycap-storm-logs")
		if err != nil {
			return nil, fmt.Errorf("storm: temp dir for the access logs: %w", err)
		}
		defer os.RemoveAll(dir)
		o.AccessLogDir = dir
		removeLogs = true
	} else if err := os.MkdirAll(o.AccessLogDir, 0o755); err != nil {
		return nil, fmt.Errorf("storm: access-log directory: %w", err)
	}
	res := &Result{Options: o, Scenario: sc, logsRemoved: removeLogs}
	for _, arm := range []string{ArmNaive, ArmRetrycap} {
		fmt.Fprintf(out, "storm: %s arm (%s): %s, %d user requests/s for %s, payment down at %s for %s\n",
			arm, o.Protocol, sc.Chain(), o.RPS, o.Duration, o.OutageStart, o.OutageLength)
		ar, tl, err := runArm(ctx, bin, arm, sc, o)
		if err != nil {
			return nil, err
		}
		if arm == ArmNaive {
			res.Naive = ar
		} else {
			res.Retrycap, res.Timeline = ar, tl
		}
	}
	res.Targets = Judge(res.Naive, res.Retrycap, sc.ChainCap, DefaultRecovery.Step)
	if o.ChartPath != "" {
		if err := WriteChart(o.ChartPath, res); err != nil {
			return res, err
		}
		res.ChartPath = o.ChartPath
		fmt.Fprintf(out, "storm: chart written to %s\n", o.ChartPath)
	}
	return res, nil
}

// SelfProxy is set by a binary that also runs as retrycap-proxy when invoked under that name
// (the retrycap CLI does): the lab then runs it, through a link named retrycap-proxy, when no
// retrycap-proxy is installed.
var SelfProxy bool

// ProxyName is the proxy's executable name.
const ProxyName = "retrycap-proxy"

// findProxy finds a retrycap-proxy to run without --proxy-binary: next to the running executable,
// else on PATH, else the running executable itself (SelfProxy) through a link in dir, else one
// built from the repository around the working directory. Only when none of these can be had does
// it fail, saying what to install.
func findProxy(dir string) (string, error) {
	exe, exeErr := os.Executable()
	if exeErr == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			if p := filepath.Join(filepath.Dir(exe), ProxyName); isExecutable(p) {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath(ProxyName); err == nil {
		return p, nil
	}
	if SelfProxy && exeErr == nil {
		link := filepath.Join(dir, ProxyName)
		if err := os.Symlink(exe, link); err == nil {
			return link, nil
		}
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", fmt.Errorf("storm: no %s next to %s or on PATH, and not in the retrycap repository to build one; "+
			"install it (go install github.com/retrycap/retrycap/cmd/retrycap-proxy@latest) or pass --proxy-binary", ProxyName, exe)
	}
	bin, err := labapp.BuildProxy(root, dir)
	if err != nil {
		return "", fmt.Errorf("storm: %w", err)
	}
	return bin, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// runArm starts one arm's chain, runs the load with the outage, waits for
// the user requests to finish and computes the arm's figures.
func runArm(ctx context.Context, bin, arm string, sc Scenario, o Options) (ArmResult, Timeline, error) {
	c, err := startChainProto(bin, arm, o.Protocol, sc, PaymentConfig{Workers: o.workers(), Work: o.Work, Queue: o.queue()}, o.AccessLogDir, nil)
	if err != nil {
		return ArmResult{}, Timeline{}, err
	}
	defer c.close()

	var (
		mu      sync.Mutex
		users   []UserRequest
		samples []Sample
		wg      sync.WaitGroup
	)
	start := time.Now()
	since := func() time.Duration { return time.Since(start) }
	tl := Timeline{LoadEnd: o.Duration}

	// The sampler: counters every sampleEvery until stopped.
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan error, 1)
	sampleOnce := func() error {
		p, r, err := c.counters(ctx)
		if err != nil {
			return err
		}
		mu.Lock()
		samples = append(samples, Sample{At: since(), PaymentRequests: p, Retries: r, ClientRetries: float64(c.clientRetries.Load())})
		mu.Unlock()
		return nil
	}
	// A scrape can time out on a saturated machine (the naive arm's storm
	// is CPU-heavy): the counters are cumulative, so a missed sample only
	// coarsens the interpolation. Only a run without any sample fails.
	go func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		var lastErr error
		got := 0
		for {
			select {
			case <-sampleCtx.Done():
				if got == 0 && lastErr != nil {
					sampled <- lastErr
				} else {
					sampled <- nil
				}
				return
			case <-t.C:
				if err := sampleOnce(); err != nil {
					lastErr = err
				} else {
					got++
				}
			}
		}
	}()

	bar := newProgress(o, arm)
	lastPay, lastAt := 0.0, time.Duration(0)
	progress := func(now time.Duration) {
		if bar == nil {
			return
		}
		mu.Lock()
		var pay float64
		if len(samples) > 0 {
			pay = samples[len(samples)-1].PaymentRequests
		}
		var sent, ok int
		for i := len(users) - 1; i >= 0 && users[i].Done > now-time.Second; i-- {
			sent++
			if users[i].OK {
				ok++
			}
		}
		mu.Unlock()
		rate := 0.0
		if dt := (now - lastAt).Seconds(); dt > 0 {
			rate = (pay - lastPay) / dt
		}
		lastPay, lastAt = pay, now
		state := "payment up"
		if now >= tl.OutageStart && (tl.Restore == 0 || now < tl.Restore) && tl.OutageStart > 0 {
			state = "payment DOWN"
		}
		okPct := "-"
		if sent > 0 {
			okPct = fmt.Sprintf("%3.0f%%", 100*float64(ok)/float64(sent))
		}
		bar.Describe(fmt.Sprintf("%-8s %-12s payment %5.0f req/s, users ok %s", arm, state, rate, okPct))
		_ = bar.Set(int(math.Min(now.Seconds(), o.Duration.Seconds())))
	}

	// The load: user request i is sent at i/RPS, whatever happened to the
	// ones before (open loop). The outage is driven by the same clock.
	interval := time.Second / time.Duration(o.RPS)
	killed, restored := false, false
	nextProgress := time.Second
	var runErr error
	for i := 0; ; i++ {
		at := time.Duration(i) * interval
		if at >= o.Duration {
			break
		}
		for {
			now := since()
			if !killed && now >= o.OutageStart {
				c.payment.Kill()
				killed, tl.OutageStart = true, since()
			}
			if killed && !restored && now >= o.OutageStart+o.OutageLength {
				if err := c.payment.Restore(); err != nil {
					runErr = err
				}
				restored, tl.Restore = true, since()
			}
			if now >= nextProgress {
				progress(now)
				nextProgress += time.Second
			}
			if now >= at {
				break
			}
			wait := at - now
			if next := o.OutageStart - now; !killed && next > 0 && next < wait {
				wait = next
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				runErr = ctx.Err()
			}
			if runErr != nil {
				break
			}
		}
		if runErr != nil {
			break
		}
		u := loadMix(i, sc)
		if o.Protocol == ProtocolGRPC {
			u = grpcSpec(u)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			uctx, cancel := context.WithTimeout(ctx, o.UserTimeout)
			defer cancel()
			sent := since()
			ok, attempts := c.userRequest(uctx, u)
			done := since()
			mu.Lock()
			users = append(users, UserRequest{Sent: sent, Done: done, OK: ok, Attempts: attempts})
			mu.Unlock()
		}()
	}
	if bar != nil {
		bar.Describe(fmt.Sprintf("%-8s waiting for the last user requests (at most %s)", arm, o.UserTimeout))
	}
	wg.Wait()
	stopSampling()
	if err := <-sampled; err != nil && runErr == nil {
		runErr = fmt.Errorf("%s arm: %w", arm, err)
	}
	// The final reading must exist: the load is over, retry a few times.
	for try := 0; ; try++ {
		err := sampleOnce()
		if err == nil || ctx.Err() != nil {
			break
		}
		if try == 4 {
			if runErr == nil {
				runErr = fmt.Errorf("%s arm: final counters: %w", arm, err)
			}
			break
		}
	}
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(o.Progress)
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return ArmResult{}, tl, fmt.Errorf("storm: %s arm interrupted: %w", arm, runErr)
		}
		return ArmResult{}, tl, runErr
	}
	if !restored {
		return ArmResult{}, tl, fmt.Errorf("storm: %s arm: payment was never restored (duration %s, outage ends at %s)",
			arm, o.Duration, o.OutageStart+o.OutageLength)
	}
	ar := Compute(arm, users, samples, tl, DefaultRecovery)
	ar.Charges, ar.Replayed, ar.Duplicates = c.payment.Effects().Counts()
	if o.AccessLogDir != "" {
		c.close() // flushes the access logs
		rep, err := ObserveArm(o.AccessLogDir, arm, observeThreshold)
		if err != nil {
			return ArmResult{}, tl, err
		}
		ar.Observed = rep
	}
	return ar, tl, nil
}

// newProgress is the live progress line, or nil without o.Progress.
func newProgress(o Options, arm string) *progressbar.ProgressBar {
	if o.Progress == nil {
		return nil
	}
	return progressbar.NewOptions(int(o.Duration.Seconds()),
		progressbar.OptionSetWriter(o.Progress),
		progressbar.OptionSetDescription(arm),
		progressbar.OptionSetWidth(20),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowCount(),
		progressbar.OptionSetRenderBlankState(true),
	)
}
