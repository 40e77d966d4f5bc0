package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// TestGivenProblem: a flag given on the command line with a value the manager would read as
// "the default" (zero, empty) or could not act on is refused, naming the flag and the value.
func TestGivenProblem(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--prometheus-url", "http://p:9090", "--prometheus-interval", "0"}, "--prometheus-interval 0s: want more than 0 (leave the flag out for the default, 1m0s)"},
		{[]string{"--prometheus-url", "http://p:9090", "--prometheus-series-limit", "0"}, "--prometheus-series-limit 0: want more than 0 (leave the flag out for the default, 10000)"},
		{[]string{"--prometheus-url", "http://p:9090", "--prometheus-interval", "2m"}, ""},
		// Before: passed over; the policy status never showed what the flag was given for.
		{[]string{"--prometheus-interval", "2m"}, "--prometheus-interval 2m0s: has no effect without --prometheus-url"},
		// Before: each of these was its default without a word.
		{[]string{"--leader-elect-lease-duration", "0"}, "--leader-elect-lease-duration 0s: want more than 0 (leave the flag out for the default, 15s)"},
		{[]string{"--mesh-recheck-interval", "0s"}, "--mesh-recheck-interval 0s: want more than 0 (leave the flag out for the default, 1m0s)"},
		{[]string{"--mesh-apis", ""}, `--mesh-apis "": want auto, none or a comma-separated list (leave the flag out for the default, auto)`},
		{[]string{"--proxy-image", ""}, `--proxy-image "": want an image reference (leave the flag out for the default, retrycap/retrycap-proxy:v0.1.0)`},
		{[]string{"--prometheus-url", "http://p:9090", "--prometheus-caller-label", ""}, `--prometheus-caller-label "": want a Prometheus label name (leave the flag out for the default, caller)`},
		{[]string{"--prometheus-url", "http://p:9090", "--prometheus-istio-cluster", ""}, `--prometheus-istio-cluster "": want an Istio cluster ID (leave the flag out to set none)`},
		{[]string{"--prometheus-istio-cluster", "east"}, "--prometheus-istio-cluster east: has no effect without --prometheus-url"},
		{[]string{"--prometheus-url", "http://p:9090", "--prometheus-cluster", ""}, `--prometheus-cluster "": want a cluster label's value (leave the flag out to set none)`},
		{[]string{"--prometheus-cluster", "east"}, "--prometheus-cluster east: has no effect without --prometheus-url"},
		{[]string{"--webhook-cert-dir", ""}, `--webhook-cert-dir "": want a directory (leave the flag out for the default, /tmp/k8s-webhook-server/serving-certs)`},
		// Before: the watcher asked the API server's discovery every nanosecond.
		{[]string{"--mesh-recheck-interval", "1ns"}, "--mesh-recheck-interval 1ns: want at least 1s"},
		{[]string{"--mesh-recheck-interval", "2s"}, ""},
		// Before: taken (issue 25). A lease of 999999h (3.6e9 s): the lease's seconds (an int32) wrap.
		{[]string{"--leader-elect-lease-duration", "999999h"}, "--leader-elect-lease-duration 999999h0m0s: want 0..1h"},
		{[]string{"--leader-elect-lease-duration", "1h"}, ""},
		{[]string{"--leader-elect-lease-duration", "-15s"}, "--leader-elect-lease-duration -15s: want 0..1h"},
		{[]string{"--mesh-recheck-interval", "24h0m0.000000001s"}, "--mesh-recheck-interval 24h0m0.000000001s: want 0..24h"},
		{[]string{"--prometheus-url", "http://p:9090", "--prometheus-interval", "2562047h"}, "--prometheus-interval 2562047h0m0s: want 0..24h"},
		{[]string{"--shutdown-delay", "0s"}, ""},
		{[]string{"--shutdown-delay", "61m"}, "--shutdown-delay 1h1m0s: want 0..1h"},
	} {
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("prometheus-url", "", "")
		fs.Duration("prometheus-interval", time.Minute, "")
		fs.Uint64("prometheus-series-limit", 10000, "")
		fs.Duration("leader-elect-lease-duration", 15*time.Second, "")
		fs.Duration("mesh-recheck-interval", time.Minute, "")
		fs.Duration("shutdown-delay", 5*time.Second, "")
		fs.String("mesh-apis", "auto", "")
		fs.String("proxy-image", "retrycap/retrycap-proxy:v0.1.0", "")
		fs.String("prometheus-caller-label", "caller", "")
		fs.String("prometheus-istio-cluster", "", "")
		fs.String("prometheus-cluster", "", "")
		fs.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := givenProblem(fs); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestIstioDefaultRetriesHelp: --istio-default-retries left out leaves the option nil (the
// MeshConfigs decide) and its help names no default; given, 0 included, it is that number.
// Before, a plain Int64 flag printed "(default 2)", as if 2 were used when it was left out.
func TestIstioDefaultRetriesHelp(t *testing.T) {
	var v *int64
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(optionalInt64{&v}, "istio-default-retries", istioDefaultUsage)
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	want := "  -istio-default-retries int\n" +
		"    \tIstio's default retries for routes that set none, an int of 0 or more; unset: the MeshConfigs' defaultHttpRetryPolicy.attempts (ConfigMaps istio-system/istio and istio-system/istio-<rev>, the most of them), else Istio's 2\n"
	if help.String() != want {
		t.Errorf("help:\n%s\nwant:\n%s", help.String(), want)
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(nil); err != nil || v != nil {
		t.Fatalf("left out: %v, err %v; want nil", v, err)
	}
	for _, tc := range []struct {
		arg  string
		want int64
	}{{"0", 0}, {"5", 5}} {
		v = nil
		if err := fs.Parse([]string{"--istio-default-retries", tc.arg}); err != nil || v == nil || *v != tc.want {
			t.Errorf("--istio-default-retries %s: %v, err %v; want %d", tc.arg, v, err, tc.want)
		}
	}
	v = nil
	err := fs.Parse([]string{"--istio-default-retries", "two"})
	if want := `invalid value "two" for flag -istio-default-retries: "two" is not an integer`; err == nil || err.Error() != want || v != nil {
		t.Errorf("--istio-default-retries two: %v, err %v; want nil and %q", v, err, want)
	}
	// review19: a negative count was taken (counted as Istio's default of 1 try) where the help
	// says 0 or more and `retrycap analyze --istio-default-retries -3` refuses it.
	err = fs.Parse([]string{"--istio-default-retries", "-3"})
	if want := `invalid value "-3" for flag -istio-default-retries: -3 is under 0 (Istio's retries are 0 or more)`; err == nil || err.Error() != want || v != nil {
		t.Errorf("--istio-default-retries -3: %v, err %v; want nil and %q", v, err, want)
	}
}
