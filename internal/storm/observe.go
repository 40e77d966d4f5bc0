package storm

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/retrycap/retrycap/internal/observe"
)

// observeThreshold is the attempts per key over which the lab's observe summary counts a key,
// the first write-up's "more than five".
const observeThreshold = 5

// accessLogPath is hop i's proxy's access log (0: the entry proxy, the client's side), in a
// directory per arm: the arms send the same user requests (the same keys), so observe reads
// one arm's directory at a time.
func accessLogPath(dir, arm string, i int) string {
	return filepath.Join(dir, arm, hopNames[i].service+".log")
}

// checkAccessLogDir refuses an --access-logs directory that holds an earlier run's logs: the
// proxies append, and the arms send the same keys every run, so observe would count both runs'
// attempts as one run's.
func checkAccessLogDir(dir string) error {
	for _, arm := range []string{ArmNaive, ArmRetrycap} {
		for _, p := range AccessLogPaths(dir, arm) {
			if _, err := os.Stat(p); err == nil {
				rel, _ := filepath.Rel(dir, p)
				return fmt.Errorf("storm: --access-logs %s: holds %s from an earlier run (the proxies append to it: observe would count both runs' attempts); give an empty or new directory", dir, filepath.ToSlash(rel))
			}
		}
	}
	return nil
}

// AccessLogPaths are one arm's access logs, entry proxy first.
func AccessLogPaths(dir, arm string) []string {
	out := make([]string, len(hopNames))
	for i := range hopNames {
		out[i] = accessLogPath(dir, arm, i)
	}
	return out
}

// ObserveGrouper reads one arm's access logs into a grouper.
func ObserveGrouper(dir, arm string) (*observe.Grouper, error) {
	g := observe.NewGrouper()
	for _, p := range AccessLogPaths(dir, arm) {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("storm: %s arm: access log: %w", arm, err)
		}
		st, err := observe.Parse(f, observe.Source{Name: p}, g.Add)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("storm: %s arm: %w", arm, err)
		}
		g.AddStats(st)
	}
	return g, nil
}

// ObserveArm is observe's report on one arm's access logs: the keys over threshold attempts
// (the worst 10 listed).
func ObserveArm(dir, arm string, threshold int) (*observe.Report, error) {
	g, err := ObserveGrouper(dir, arm)
	if err != nil {
		return nil, err
	}
	return g.Report(threshold, 10), nil
}

// Tiers are the chain's services below the edge client, top-down: where an attempt can start.
func Tiers() []string {
	out := make([]string, len(hopNames))
	for i, h := range hopNames {
		out[i] = h.upstream
	}
	return out
}

// HopProxies name the chain's proxies, top-down, as the summary does: the entry proxy (the
// edge client's sidecar, toward gateway), the gateway's (toward order) and the order's (toward
// payment).
func HopProxies() []string { return []string{"entry", hopNames[1].service, hopNames[2].service} }

// tierAttempts are the requests every tier received, timed from start: as payment and the
// HTTP chain's apps recorded them on arrival. The gRPC chain's apps run in child processes,
// so for gateway and order it reads the attempts the proxies in front of them logged
// (--access-log: the time an attempt started, in wall-clock microseconds; the apps propagate
// baggage, so every line carries its storm-op). An attempt whose client went away before it
// ended has no line there, so over gRPC these two tiers may count short.
func (c *chain) tierAttempts(logDir string, start time.Time) ([]TierAttempt, error) {
	out := c.arrived.since(start)
	if c.proto != ProtocolGRPC {
		return out, nil
	}
	if logDir == "" {
		return nil, fmt.Errorf("storm: %s arm: the gRPC chain's tier attempts need its access logs", c.arm)
	}
	for i := 0; i < 2; i++ {
		logged, err := c.loggedAttempts(logDir, i, start)
		if err != nil {
			return nil, err
		}
		out = append(out, logged...)
	}
	return out, nil
}

// loggedAttempts are the attempts hop's proxy logged toward its upstream (--access-log: the
// time an attempt started, in wall-clock microseconds), timed from start: refused
// connections included, which the tier below never saw.
func (c *chain) loggedAttempts(logDir string, hop int, start time.Time) ([]TierAttempt, error) {
	wall := start.Round(0) // the wall clock only, as the log's times
	p := accessLogPath(logDir, c.arm, hop)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("storm: %s arm: access log: %w", c.arm, err)
	}
	defer f.Close()
	var out []TierAttempt
	if _, err := observe.Parse(f, observe.Source{Name: p}, func(a observe.Attempt) {
		if a.Target == hopNames[hop].upstream {
			out = append(out, TierAttempt{Tier: a.Target, Op: a.StormOp, At: a.Time.Sub(wall)})
		}
	}); err != nil {
		return nil, fmt.Errorf("storm: %s arm: %w", c.arm, err)
	}
	return out, nil
}
