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
	// Checked before the arms: found only when the chart was written, a bad path cost the
	// whole run (2 minutes), its figures with it.
	if err := CheckChartPath(o.ChartPath); err != nil {
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
	} else if err := checkAccessLogDir(o.AccessLogDir); err != nil {
		return nil, err
	} else if err := os.MkdirAll(o.AccessLogDir, 0o755); err != nil {
		return nil, fmt.Errorf("storm: access-log directory: %w", err)
	}
	res := &Result{Options: o, Scenario: sc, logsRemoved: removeLogs}
	for _, arm := range []string{ArmNaive, ArmRetrycap} {
		fmt.Fprintf(out, "storm: %s arm (%s): %s, %d user requests/s for %s, payment down (%s) at %s for %s\n",
			arm, o.Protocol, sc.Chain(), o.RPS, o.Duration, o.Outage, o.OutageStart, o.OutageLength)
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
	res.Targets = Judge(res.Naive, res.Retrycap, sc.ChainCap, DefaultRecovery.Step, o.MaxTimeToAnswer)
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

// armRun is one arm's run in progress: its chain, the clock its load and
// fault run on, and what it recorded.
type armRun struct {
	o     Options
	arm   string
	sc    Scenario
	c     *chain
	start time.Time
	tl    Timeline
	bar   *progressbar.ProgressBar

	mu      sync.Mutex
	users   []UserRequest
	samples []Sample
	wg      sync.WaitGroup // the user requests in flight

	lastPay float64 // the progress line's previous reading
	lastAt  time.Duration
}

// since is the time since the arm's load began.
func (r *armRun) since() time.Duration { return time.Since(r.start) }

// runArm starts one arm's chain, runs the load with the outage, waits for
// the user requests to finish and computes the arm's figures.
func runArm(ctx context.Context, bin, arm string, sc Scenario, o Options) (ArmResult, Timeline, error) {
	c, err := startChainProto(bin, arm, o.Protocol, sc, o.MaxTimeToAnswer,
		PaymentConfig{Workers: o.workers(), Work: o.Work, Queue: o.queue()}, o.AccessLogDir, nil)
	if err != nil {
		return ArmResult{}, Timeline{}, err
	}
	defer c.close()
	r := &armRun{o: o, arm: arm, sc: sc, c: c, start: time.Now(), tl: Timeline{LoadEnd: o.Duration}, bar: newProgress(o, arm)}
	stopSampling := r.sample(ctx)
	restored, runErr := r.drive(ctx)
	if r.bar != nil {
		r.bar.Describe(fmt.Sprintf("%-8s waiting for the last user requests (at most %s)", arm, o.UserTimeout))
	}
	r.wg.Wait()
	if err := stopSampling(); err != nil && runErr == nil {
		runErr = fmt.Errorf("%s arm: %w", arm, err)
	}
	if err := r.finalSample(ctx); err != nil && runErr == nil {
		runErr = fmt.Errorf("%s arm: final counters: %w", arm, err)
	}
	if r.bar != nil {
		_ = r.bar.Finish()
		fmt.Fprintln(o.Progress)
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return ArmResult{}, r.tl, fmt.Errorf("storm: %s arm interrupted: %w", arm, runErr)
		}
		return ArmResult{}, r.tl, runErr
	}
	if !restored {
		return ArmResult{}, r.tl, fmt.Errorf("storm: %s arm: payment was never restored (duration %s, outage ends at %s)",
			arm, o.Duration, o.OutageStart+o.OutageLength)
	}
	ar, err := r.result()
	return ar, r.tl, err
}

// sampleOnce reads the counters into a Sample.
func (r *armRun) sampleOnce(ctx context.Context) error {
	p, ret, hops, err := r.c.counters(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.samples = append(r.samples, Sample{At: r.since(), PaymentRequests: p, Retries: ret, HopRetries: hops, ClientRetries: float64(r.c.clientRetries.Load())})
	r.mu.Unlock()
	return nil
}

// sample reads the counters every sampleEvery until the returned stop is
// called. A scrape can time out on a saturated machine (the naive arm's
// storm is CPU-heavy): the counters are cumulative, so a missed sample only
// coarsens the interpolation. Only a run without any sample fails: stop
// returns the last error then. A reading that is not counts (errNotCounts)
// fails the run at once.
func (r *armRun) sample(ctx context.Context) (stop func() error) {
	sampleCtx, cancel := context.WithCancel(ctx)
	sampled := make(chan error, 1)
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
				if err := r.sampleOnce(ctx); errors.As(err, new(errNotCounts)) {
					sampled <- err // a broken reading, not a slow one: no later sample makes it right
					return
				} else if err != nil {
					lastErr = err
				} else {
					got++
				}
			}
		}
	}()
	return func() error {
		cancel()
		return <-sampled
	}
}

// boundarySample reads the counters at the hang and just before the restore, so that the
// outage's counts are not interpolated across the restore: there the held attempts are
// answered 503 at once and the naive arm retries them in a burst, which a reading 250 ms later
// spread over the window before it (the short preset's 3 s hang counted 420 naive retries,
// 311 of them decided in it by the proxies' access logs). It waits for the scrape at most
// 250 ms, which delays the restore by as much (the timeline records when it came); a reading
// that fails is left to the periodic ones.
func (r *armRun) boundarySample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, sampleEvery)
	defer cancel()
	_ = r.sampleOnce(ctx)
}

// finalSample takes the reading after the load, which must exist: it is
// tried five times.
func (r *armRun) finalSample(ctx context.Context) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = r.sampleOnce(ctx); err == nil || ctx.Err() != nil {
			return nil
		}
		if errors.As(err, new(errNotCounts)) {
			return err
		}
	}
	return err
}

// drive runs the load: user request i is sent at i/RPS, whatever happened
// to the ones before (open loop). The outage is driven by the same clock:
// payment killed at OutageStart, restored OutageLength later. It returns
// whether payment was restored, and the first error (payment's restore, or
// ctx's end). Killed stands for hung too (Options.Outage).
func (r *armRun) drive(ctx context.Context) (restored bool, runErr error) {
	o := r.o
	interval := time.Second / time.Duration(o.RPS)
	killed := false
	nextProgress := time.Second
	for i := 0; ; i++ {
		at := time.Duration(i) * interval
		if at >= o.Duration {
			return restored, runErr
		}
		for {
			now := r.since()
			// The fault comes between two user requests by their schedule: on a late loop, one
			// due before the hang (or the restore) is still sent before it, so that the user
			// requests of the outage are exactly those scheduled in it.
			if !killed && now >= o.OutageStart && at >= o.OutageStart {
				if o.Outage == OutageHang {
					r.c.payment.Hang()
				} else {
					r.c.payment.Kill()
				}
				killed, r.tl.OutageStart = true, r.since()
				r.boundarySample(ctx)
			}
			if killed && !restored && now >= o.OutageStart+o.OutageLength && at >= o.OutageStart+o.OutageLength {
				r.boundarySample(ctx)
				r.tl.restoreCalled = r.since()
				if err := r.c.payment.Restore(); err != nil {
					runErr = err
				}
				restored, r.tl.Restore = true, r.since()
			}
			if now >= nextProgress {
				r.progress(now)
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
				return restored, runErr
			}
		}
		if runErr != nil {
			return restored, runErr
		}
		u := loadMix(i, r.sc)
		if o.Protocol == ProtocolGRPC {
			u = grpcSpec(u)
		}
		// Sent, and the user's timeout, start here, in the loop that hangs and restores
		// payment: a user request is in the outage exactly when the loop sent it between
		// the two, not when its goroutine first ran (late, on a busy machine).
		sent := r.since()
		uctx, cancel := context.WithTimeout(ctx, o.UserTimeout)
		r.wg.Add(1)
		go r.user(ctx, uctx, cancel, sent, u)
	}
}

// user runs one user request, sent at sent under uctx (the user's timeout), and records its
// fate.
func (r *armRun) user(ctx, uctx context.Context, cancel context.CancelFunc, sent time.Duration, u userSpec) {
	defer r.wg.Done()
	defer cancel()
	ok, attempts := r.c.userRequest(uctx, u)
	done := r.since()
	gaveUp := !ok && errors.Is(uctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	done = userDone(sent, done, r.o.UserTimeout, gaveUp)
	r.mu.Lock()
	r.users = append(r.users, UserRequest{Sent: sent, Done: done, OK: ok, Attempts: attempts, GaveUp: gaveUp, Op: u.op})
	r.mu.Unlock()
}

// userDone is when a user request stopped waiting: done, as the edge client saw it, except for
// one that gave up, which stopped at its timeout. The edge client shares its process with payment
// and the HTTP apps, and on a starved machine its timer and the goroutine behind it run late: with
// the naive arm's work in the same process at load 25 on 2 cores, give-ups were recorded up to 7
// s after the 10 s timeout. The user behind it would have left at 10 s: its wait is the timeout.
func userDone(sent, done, timeout time.Duration, gaveUp bool) time.Duration {
	if gaveUp && done > sent+timeout {
		return sent + timeout
	}
	return done
}

// progress updates the live progress line (none without Options.Progress):
// the state of payment, requests/s at payment, users ok in the last second.
func (r *armRun) progress(now time.Duration) {
	if r.bar == nil {
		return
	}
	r.mu.Lock()
	var pay float64
	if len(r.samples) > 0 {
		pay = r.samples[len(r.samples)-1].PaymentRequests
	}
	var sent, ok int
	for i := len(r.users) - 1; i >= 0 && r.users[i].Done > now-time.Second; i-- {
		sent++
		if r.users[i].OK {
			ok++
		}
	}
	r.mu.Unlock()
	rate := 0.0
	if dt := (now - r.lastAt).Seconds(); dt > 0 {
		rate = (pay - r.lastPay) / dt
	}
	r.lastPay, r.lastAt = pay, now
	state := "payment up"
	if now >= r.tl.OutageStart && (r.tl.Restore == 0 || now < r.tl.Restore) && r.tl.OutageStart > 0 {
		state = "payment DOWN"
	}
	okPct := "-"
	if sent > 0 {
		okPct = fmt.Sprintf("%3.0f%%", 100*float64(ok)/float64(sent))
	}
	r.bar.Describe(fmt.Sprintf("%-8s %-12s payment %5.0f req/s, users ok %s", r.arm, state, rate, okPct))
	_ = r.bar.Set(int(math.Min(now.Seconds(), r.o.Duration.Seconds())))
}

// result computes the arm's figures once the load is over: the accounting,
// payment's side effects, then (the chain closed, which flushes the access
// logs) observe's report and the orphaned attempts.
func (r *armRun) result() (ArmResult, error) {
	ar := Compute(r.arm, r.users, r.samples, r.tl, DefaultRecovery)
	ar.Charges, ar.Replayed, ar.Duplicates = r.c.payment.Effects().Counts()
	r.c.close() // flushes the access logs
	if r.o.AccessLogDir != "" {
		rep, err := ObserveArm(r.o.AccessLogDir, r.arm, observeThreshold)
		if err != nil {
			return ArmResult{}, err
		}
		ar.Observed = rep
	}
	tierAttempts, err := r.c.tierAttempts(r.o.AccessLogDir, r.start)
	if err != nil {
		return ArmResult{}, err
	}
	// Requests at payment per failed user request, joined by storm-op. Under a hang payment
	// reads every request, so what it received is the count. Under a kill it receives none
	// (connections refused): the order proxy's attempts toward it, from its access log, are.
	atPayment := tierAttempts
	if r.o.Outage == OutageKill {
		if atPayment, err = r.c.loggedAttempts(r.o.AccessLogDir, 2, r.start); err != nil {
			return ArmResult{}, err
		}
	}
	pf := PerFailedExact(r.users, atPayment, hopNames[2].upstream, r.tl, r.sc.Amplification())
	ar.PerFailed = &pf
	orphans, perOp := orphanedAttempts(r.users, tierAttempts, r.o.UserTimeout, Tiers())
	if orphans.Checked == 0 {
		return ArmResult{}, fmt.Errorf("storm: %s arm: orphaned attempts: no tier attempt could be joined to a user request (%d read, %d without a known storm-op)",
			r.arm, len(tierAttempts), orphans.Unmatched)
	}
	ar.Orphans, ar.orphanedOps, ar.attempts = &orphans, perOp, tierAttempts
	return ar, nil
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
