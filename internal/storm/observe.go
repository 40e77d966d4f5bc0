package storm

import (
	"fmt"
	"os"
	"path/filepath"

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
