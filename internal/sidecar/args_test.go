package sidecar

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The injector's command line for a typical pod, exactly as the golden files have it.
func TestRenderInjectorForm(t *testing.T) {
	a := Defaults()
	a.Service, a.Upstreams, a.Entrypoint, a.ChainCap = "gateway", "order=3", true, 3
	want := []string{
		"--listen=127.0.0.1:15001", "--admin=:15020", "--service=gateway", "--upstreams=order=3", "--entrypoint=true", "--chain-cap=3", "--default-attempts=1",
		"--per-try-timeout=2s", "--backoff-base=100ms", "--backoff-max=2s",
		"--retry-on=connect-failure,reset,502,503,504,unavailable", "--retry-methods=GET,HEAD,OPTIONS,PUT,DELETE",
		"--budget-percent=20", "--budget-min-per-second=10", "--budget-window=10s",
		"--breaker-failures=50", "--breaker-window=30s", "--breaker-open-for=10s",
	}
	if got := a.Render(); !slices.Equal(got, want) {
		t.Fatalf("Render:\n got %q\nwant %q", got, want)
	}
	// Without upstreams, --upstreams is not written; with a namespace, --namespace follows --service.
	a.Upstreams, a.Namespace = "", "shop"
	want = slices.Insert(slices.Delete(want, 3, 4), 3, "--namespace=shop")
	if got := a.Render(); !slices.Equal(got, want) {
		t.Fatalf("Render:\n got %q\nwant %q", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	cases := map[string]func(a *Args){
		"defaults": func(*Args) {},
		"zero":     func(a *Args) { *a = Args{RetryMethods: []string{}} },
		"injected": func(a *Args) {
			a.Service, a.Namespace, a.Upstreams, a.Entrypoint, a.ChainCap = "gateway", "shop", "order=3, inventory=2*4, api.example.com", true, 4
		},
		"every flag changed": func(a *Args) {
			*a = Args{
				Listen: "0.0.0.0:0", Admin: "127.0.0.1:9", Service: "s", Namespace: "ns", Upstreams: "a,b.c=2",
				Entrypoint: true, ChainCap: 1000, DefaultAttempts: 100, PerTryTimeout: 1500 * time.Millisecond, MaxTimeToAnswer: 3 * time.Second,
				BackoffBase: time.Nanosecond, BackoffMax: 90 * time.Minute, BackoffJitter: false,
				RetryOn: "5xx,timeout", RetryMethods: []string{"POST"}, BudgetPercent: 100, BudgetMinPerSecond: 0,
				BudgetWindow: time.Hour, BreakerFailures: 0, BreakerWindow: time.Minute + time.Second,
				BreakerOpenFor: 25 * time.Hour, MaxReplayBytes: 0, KeyTTL: 3 * time.Millisecond,
				Resolve: "a=127.0.0.1:1,b.c=[::1]:2", DrainTimeout: time.Microsecond, Engine: "goroutine", Check: true, PassInterimAnswers: true,
			}
		},
		// Values pflag or the proxy would refuse later are still carried exactly.
		"edge values": func(a *Args) {
			a.Service, a.Upstreams, a.Resolve = "-starts-with-dash", "=x==y", " spaced , list "
			a.ChainCap, a.BudgetPercent, a.MaxReplayBytes = -1, -100, 1<<31-1
			a.PerTryTimeout, a.BackoffBase, a.KeyTTL = -time.Second, 0, time.Hour+time.Minute
			a.RetryMethods = []string{"", `a"b`, "c,d", " e"}
			a.RetryOn, a.Engine = "", "unknown"
		},
		"one empty method":  func(a *Args) { a.RetryMethods = []string{""} },
		"no methods":        func(a *Args) { a.RetryMethods = []string{} },
		"listen at default": func(a *Args) { a.Listen = DefaultListen },
		"jitter default":    func(a *Args) { a.BackoffJitter = true },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			a := Defaults()
			mut(&a)
			args := a.Render()
			got, err := Parse(args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", args, err)
			}
			if !reflect.DeepEqual(got, a) {
				t.Fatalf("Parse(Render(a)) != a\n   a %+v\n got %+v\nargs %q", a, got, args)
			}
		})
	}
}

// nil methods render like empty ones, and parse as empty.
func TestNilMethods(t *testing.T) {
	a := Defaults()
	a.RetryMethods = nil
	got, err := Parse(a.Render())
	if err != nil || got.RetryMethods == nil || len(got.RetryMethods) != 0 {
		t.Fatalf("methods %#v, err %v", got.RetryMethods, err)
	}
}

func TestParseDefaultsAndErrors(t *testing.T) {
	got, err := Parse(nil)
	if err != nil || !reflect.DeepEqual(got, Defaults()) {
		t.Fatalf("Parse(nil) = %+v, %v", got, err)
	}
	// Both spellings pflag reads, as the storm lab writes them.
	got, err = Parse([]string{"--upstreams", "order=3", "--entrypoint", "--chain-cap", "0", "--backoff-jitter=false"})
	if err != nil || got.Upstreams != "order=3" || !got.Entrypoint || got.ChainCap != 0 || got.BackoffJitter {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
	for args, want := range map[string]string{
		"--chain-cap=x":   `invalid argument "x" for "--chain-cap" flag`,
		"--nope=1":        "unknown flag: --nope",
		"stray":           `unexpected argument "stray"`,
		"--key-ttl=1 day": `invalid argument "1 day" for "--key-ttl" flag`,
	} {
		if _, err := Parse([]string{args}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) err %v, want %s", args, err, want)
		}
	}
}

// Every field of Args is a flag of the contract, and every flag sets a field of its own.
func TestEveryFieldIsAFlag(t *testing.T) {
	var a Args
	seen := map[uintptr]string{}
	for _, f := range flags {
		p := reflect.ValueOf(f.field(&a)).Pointer()
		if other, dup := seen[p]; dup {
			t.Errorf("flags %s and %s set the same field", f.name, other)
		}
		seen[p] = f.name
	}
	if n := reflect.TypeOf(a).NumField(); n != len(flags) {
		t.Errorf("Args has %d fields, the contract %d flags", n, len(flags))
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	a.Bind(fs)
	var bound []string
	fs.VisitAll(func(f *pflag.Flag) { bound = append(bound, f.Name) })
	if names := FlagNames(); !slices.Equal(sorted(bound), sorted(names)) {
		t.Errorf("bound %v, FlagNames %v", bound, names)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", time.Nanosecond: "1ns", 100 * time.Millisecond: "100ms", 1500 * time.Millisecond: "1.5s",
		time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h", time.Hour + time.Minute: "1h1m",
		time.Hour + time.Second: "1h0m1s", -time.Minute: "-1m",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(Duration(d)); err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %s, %v", Duration(d), back, err)
		}
	}
}
