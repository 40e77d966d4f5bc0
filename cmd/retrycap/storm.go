package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/retrycap/retrycap/internal/cli"
	"github.com/retrycap/retrycap/internal/storm"
)

// newStormCmd returns `storm`: the retry-storm lab.
func newStormCmd(_ io.Reader, stdout, stderr io.Writer) *cobra.Command {
	o := storm.Defaults()
	var short, noProgress, series bool
	output := "text"
	o.ChartPath = "storm.svg"
	cmd := &cobra.Command{
		Use:   "storm",
		Short: "Run the retry-storm lab: naive retries vs retrycap on real proxies, payment hung (or killed) and restored",
		Long: "storm runs an edge client, gateway, order and payment services on loopback, each behind a real " +
			"retrycap-proxy, under steady open-loop load. Payment (capacity-limited) hangs for a while (it reads " +
			"requests and answers none; --outage kill crashes it instead) and is restored. Two arms run on the same load: naive (the declared attempts per hop, no jitter, no budget, " +
			"no breaker) and retrycap (same attempts, chain cap, retry budget, breaker, jitter). It prints, per arm, " +
			"requests at payment per failed user request, retries during the outage, the user's wait for an answer " +
			"during the outage (p50/p99), orphaned attempts (started at a tier after the user stopped waiting), " +
			"time to recover and duplicated POST side effects, and writes an SVG chart of requests/s at payment.\n\n" +
			"Presets: " + scenarioHelp() + ".\n\n" +
			"It runs retrycap-proxy: --proxy-binary, else one next to this executable or on PATH, else this " +
			"executable acting as the proxy.\n\n" +
			"Exit status: 0 when the retrycap arm meets every target (requests at payment per failed user " +
			"request <= cap, retries during the outage >= 94 % fewer, recovery >= 10x faster, no duplicated " +
			"POST side effect, the user's wait p99 within its max time to answer, no orphaned attempt), " +
			"1 when one is missed, 2 on bad flags or when the lab cannot run.",
		Example: "  retrycap storm --short                             # about 45 s\n" +
			"  retrycap storm --scenario incident18 --outage kill\n" +
			"  retrycap storm --protocol grpc -o json > storm.json\n" +
			"  retrycap storm --access-logs logs/ && retrycap observe -f logs/naive/",
		Args: cli.NoArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// 0 in storm.Options means "the default" (for callers of the package); on the
			// command line it was taken silently for 50 user requests/s, a 50 s run: refused.
			for _, name := range []string{"rps", "capacity", "duration", "outage-start", "outage-length", "user-timeout"} {
				f := cmd.Flags().Lookup(name)
				if v := f.Value.String(); f.Changed && (v == "0" || v == "0s" || strings.HasPrefix(v, "-")) {
					return &cli.ExitError{Code: cli.ExitBadInput, Msg: fmt.Sprintf("--%s %s: want more than 0 (leave the flag out for the default, %s)", name, v, f.DefValue)}
				}
			}
			if short {
				s := storm.Short()
				// Flags given explicitly still win over the short preset.
				for _, f := range []struct {
					name string
					set  func()
				}{
					{"duration", func() { s.Duration = o.Duration }},
					{"outage-start", func() { s.OutageStart = o.OutageStart }},
					{"outage-length", func() { s.OutageLength = o.OutageLength }},
					{"rps", func() { s.RPS = o.RPS }},
					{"capacity", func() { s.Capacity = o.Capacity }},
					{"user-timeout", func() { s.UserTimeout = o.UserTimeout }},
					{"max-time-to-answer", func() { s.MaxTimeToAnswer = o.MaxTimeToAnswer }},
					{"outage", func() { s.Outage = o.Outage }},
				} {
					if cmd.Flags().Changed(f.name) {
						f.set()
					}
				}
				s.Scenario, s.ProxyBinary, s.ChartPath, s.AccessLogDir, s.Protocol = o.Scenario, o.ProxyBinary, o.ChartPath, o.AccessLogDir, o.Protocol
				o = s
			}
			if _, ok := storm.Scenarios[o.Scenario]; !ok {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: fmt.Sprintf("--scenario %q: unknown, want one of %s", o.Scenario, strings.Join(storm.ScenarioNames(), ", "))}
			}
			if o.Outage != storm.OutageKill && o.Outage != storm.OutageHang {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: fmt.Sprintf("--outage %q: unknown, want %s or %s", o.Outage, storm.OutageKill, storm.OutageHang)}
			}
			if o.Protocol != storm.ProtocolHTTP && o.Protocol != storm.ProtocolGRPC {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: fmt.Sprintf("--protocol %q: unknown, want %s or %s", o.Protocol, storm.ProtocolHTTP, storm.ProtocolGRPC)}
			}
			if output != "text" && output != "json" {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: fmt.Sprintf("-o %q: unknown, want text or json", output)}
			}
			if output == "json" && series {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: "--series prints text: not with -o json"}
			}
			o.Out = stderr
			if f, ok := stderr.(*os.File); ok && !noProgress && isatty.IsTerminal(f.Fd()) {
				o.Progress = stderr
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			res, err := storm.Run(ctx, o)
			if res == nil {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: err.Error()}
			}
			// A run that measured but could not write its chart still prints what it measured.
			runErr := err
			write := res.WriteSummary
			if output == "json" {
				write = res.WriteJSON
			}
			if err := write(stdout); err != nil {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: err.Error()}
			}
			if runErr != nil {
				return &cli.ExitError{Code: cli.ExitBadInput, Msg: runErr.Error()}
			}
			if series {
				fmt.Fprintln(stdout)
				if err := res.WriteSeries(stdout); err != nil {
					return &cli.ExitError{Code: cli.ExitBadInput, Msg: err.Error()}
				}
			}
			if !res.Passed() {
				var missed []string
				for _, t := range res.Targets {
					if !t.Met {
						missed = append(missed, fmt.Sprintf("%s: want %s, got %s", t.Name, t.Want, t.Got))
					}
				}
				return &cli.ExitError{Code: cli.ExitOverCap, Msg: "storm: retrycap arm missed: " + strings.Join(missed, "; ")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Scenario, "scenario", o.Scenario, "preset: "+strings.Join(storm.ScenarioNames(), ", "))
	f.StringVar(&o.Protocol, "protocol", storm.ProtocolHTTP, "the chain's protocol: http, or grpc (every hop a gRPC call, the apps reaching their proxies through HTTPS_PROXY)")
	f.DurationVar(&o.Duration, "duration", o.Duration, "load per arm")
	f.DurationVar(&o.OutageStart, "outage-start", o.OutageStart, "when payment goes down (hangs, or is killed), after the load began")
	f.StringVar(&o.Outage, "outage", o.Outage, "how payment goes down: hang (requests read, none answered: the callers' timeouts add up) or kill (connections refused)")
	f.DurationVar(&o.OutageLength, "outage-length", o.OutageLength, "how long payment stays down")
	f.IntVar(&o.RPS, "rps", o.RPS, "user requests per second (open loop)")
	f.IntVar(&o.Capacity, "capacity", o.Capacity, "payment's capacity, requests per second")
	f.DurationVar(&o.UserTimeout, "user-timeout", o.UserTimeout, "how long the edge client waits for one user request, its retries included")
	f.DurationVar(&o.MaxTimeToAnswer, "max-time-to-answer", 0, "the retrycap arm's entrypoint maxTimeToAnswer (its entry proxy's --max-time-to-answer), at most --user-timeout; 0: a tenth under --user-timeout")
	f.StringVarP(&output, "output", "o", output, "text (the summary) or json (the same figures, durations as Go duration strings)")
	f.StringVar(&o.ProxyBinary, "proxy-binary", "", "retrycap-proxy to run (default: retrycap-proxy next to this executable, else on PATH, else this executable acting as the proxy)")
	f.StringVar(&o.ChartPath, "chart", o.ChartPath, "SVG chart of requests/s at payment; empty for none")
	f.StringVar(&o.AccessLogDir, "access-logs", "", "directory for the proxies' access logs (ARM/SERVICE.log, read by retrycap observe), refused when it holds an earlier run's ARM/SERVICE.log (the proxies append: observe would count both runs); empty: a temporary one, removed after the run")
	f.BoolVar(&short, "short", false, "the ~45 s version (a 5 s outage in a 16 s run per arm, the shortest at which the retries target holds: docs/storm-lab.md), as the demo's end-to-end test runs it; the same targets")
	f.BoolVar(&series, "series", false, "also print both arms second by second (requests/s at payment, user success rate)")
	f.BoolVar(&noProgress, "no-progress", false, "no live progress line (it is shown only on a terminal anyway)")
	return cmd
}

func scenarioHelp() string {
	var parts []string
	for _, n := range storm.ScenarioNames() {
		s := storm.Scenarios[n]
		parts = append(parts, fmt.Sprintf("%s (%s, cap %d)", n, s.Chain(), s.ChainCap))
	}
	return strings.Join(parts, "; ")
}
