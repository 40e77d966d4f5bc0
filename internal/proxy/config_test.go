package proxy

import (
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/retrycap/retrycap/internal/annotations/nametest"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// Every flag the proxy registers is the sidecar contract's: set to a value other than its
// default, it is rendered by sidecar.Args.Render, and parsing the rendering gives the same Args.
func TestEveryProxyFlagIsRendered(t *testing.T) {
	c := Defaults()
	var names []string
	c.flagSet(io.Discard).VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if !slices.Equal(names, sidecar.FlagNames()) {
		t.Fatalf("the proxy registers %v, the contract has %v", names, sidecar.FlagNames())
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := Defaults()
			fs := c.flagSet(io.Discard)
			f := fs.Lookup(name)
			var v string
			switch f.Value.Type() {
			case "string":
				v = "changed"
			case "int":
				n, _ := strconv.Atoi(f.DefValue)
				v = strconv.Itoa(n + 1)
			case "bool":
				v = strconv.FormatBool(f.DefValue != "true")
			case "duration":
				d, _ := time.ParseDuration(f.DefValue)
				v = (d + time.Second).String()
			case "stringSlice":
				v = "PATCH"
			default:
				t.Fatalf("flag --%s of type %s", name, f.Value.Type())
			}
			if err := fs.Set(name, v); err != nil {
				t.Fatal(err)
			}
			args := c.Render()
			if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") }) {
				t.Fatalf("--%s=%s is not rendered: %q", name, v, args)
			}
			back, err := sidecar.Parse(args)
			if err != nil || !reflect.DeepEqual(back, c.Args) {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", args, back, err, c.Args)
			}
		})
	}
}

// --namespace defaults to $POD_NAMESPACE (what the injector sets), and must be a DNS-1123 label.
func TestNamespaceFlag(t *testing.T) {
	t.Setenv(sidecar.NamespaceEnv, "")
	c, err := ParseFlags([]string{"--namespace=shop", "--upstreams=order=3"}, io.Discard)
	if err != nil || c.Namespace != "shop" {
		t.Fatalf("ParseFlags: %+v, %v", c, err)
	}
	if c, err = ParseFlags(nil, io.Discard); err != nil || c.Namespace != "" {
		t.Fatalf("ParseFlags(nil) without $%s: namespace %q, %v", sidecar.NamespaceEnv, c.Namespace, err)
	}
	t.Setenv(sidecar.NamespaceEnv, "payments")
	if c, err = ParseFlags(nil, io.Discard); err != nil || c.Namespace != "payments" {
		t.Fatalf("ParseFlags(nil) with $%s: namespace %q, %v", sidecar.NamespaceEnv, c.Namespace, err)
	}
	if c, err = ParseFlags([]string{"--namespace=shop"}, io.Discard); err != nil || c.Namespace != "shop" {
		t.Fatalf("the flag does not win over $%s: namespace %q, %v", sidecar.NamespaceEnv, c.Namespace, err)
	}
	_, err = ParseFlags([]string{"--namespace=Shop"}, io.Discard)
	if err == nil || err.Error() != `invalid value "Shop" for --namespace: not a DNS-1123 label: only lower-case letters, digits and '-' are allowed` {
		t.Fatalf("--namespace=Shop: %v", err)
	}
}

// The table of the upstream-name rule through the proxy's own upstream table: --upstreams and
// --namespace as the injector renders them, the upstream a request host is served as.
func TestUpstreamNameRuleInTheProxy(t *testing.T) {
	t.Setenv(sidecar.NamespaceEnv, "")
	for _, c := range nametest.Cases() {
		a := sidecar.Defaults()
		a.Upstreams, a.Namespace = c.Upstreams, c.Namespace
		cfg, err := ParseFlags(a.Render(), io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		p, err := New(cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		got := ""
		if u := p.fw.Match([]byte(c.Host)); u != nil {
			got = u.Name
		}
		if got != c.Match {
			t.Errorf("%s: the proxy serves it as upstream %q, want %q", c, got, c.Match)
		}
	}
}
