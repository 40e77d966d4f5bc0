package annotations

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
)

// Annotation and label keys.
const (
	// Service is this workload's service name (default: label app.kubernetes.io/name, else the
	// workload's name).
	Service = "retrycap.dev/service"
	// Upstreams lists the services a workload calls, e.g. "order=3, inventory=2*4, payment=3/2s".
	Upstreams = "retrycap.dev/upstreams"
	// Inject is "true"/"false": force or skip the proxy for this workload.
	Inject = "retrycap.dev/inject"
	// RewrittenFrom records, in Rewrite mode, the upstreams value retrycap replaced.
	RewrittenFrom = "retrycap.dev/rewritten-from"
	// InjectedStatus is set by the injector on the pods it injected.
	InjectedStatus = "retrycap.dev/injected"

	// InjectionLabel is the namespace label that turns injection on, with value InjectionEnabled.
	InjectionLabel = "retrycap.dev/injection"
	// InjectionEnabled is the value of InjectionLabel that enables injection.
	InjectionEnabled = "enabled"
	// InjectionDisabled is the value of InjectionLabel that says injection is off, as no label
	// does. Any other value is malformed (the injector records it on the pods a policy selects).
	InjectionDisabled = "disabled"

	// NameLabel is the well-known label used as the service name when Service is absent.
	NameLabel = "app.kubernetes.io/name"
)

// Bounds of the grammar, from the design: an upstream's attempts are tries per call, bounded as
// the policy's spec.retry.defaultAttempts is (api/v1alpha1/defaults, checked against the CRD).
const (
	MinAttempts = defaults.AttemptsMin
	MaxAttempts = defaults.AttemptsMax
	MinCalls    = 1
	MaxCalls    = 1000
)

// Upstream is one entry of retrycap.dev/upstreams.
type Upstream struct {
	Name string
	// Attempts is total tries per call; 0 = not given (the policy's defaultAttempts applies).
	Attempts int32
	// Calls is how many calls one inbound request makes to it (fan-out); 0 = not given = 1.
	Calls int32
	// PerTryTimeout bounds each try to this upstream ("payment=3/2s"); 0 = not given (the
	// policy's spec.retry.perTryTimeout applies). The time model reads it; see docs/annotations.md.
	PerTryTimeout time.Duration
	// Port is the port written after the name ("cartservice:7070", the form of the addresses
	// apps are configured with), 0 when none. The graph and the proxy name services, not ports:
	// Name is the host alone, and the port is kept only so that FormatUpstreams writes the
	// value back as written. ParseUpstreamsWarn says that it was dropped.
	Port int32
}

// Bounds of a per-upstream per-try timeout: spec.retry.perTryTimeout's (and the proxy's
// --per-try-timeout's), so that an annotation can never ask for what the policy cannot.
const (
	MinPerTryTimeout = defaults.PerTryTimeoutMin
	MaxPerTryTimeout = defaults.PerTryTimeoutMax
)

// Bounds of a port.
const (
	MinPort = 1
	MaxPort = 65535
)

// Warning is a note on a value that was accepted, but not exactly as written (a port dropped).
// Column is the 1-based byte column of Token in the value, as for ParseError.
type Warning struct {
	Token   string
	Column  int
	Message string
}

func (w Warning) String() string {
	return fmt.Sprintf("token %q at column %d: %s", w.Token, w.Column, w.Message)
}

// ParseError is a malformed upstreams value. Column is the 1-based byte column of Token in
// the value, so a user can find it in a long annotation.
type ParseError struct {
	Token  string
	Column int
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("token %q at column %d: %s", e.Token, e.Column, e.Reason)
}

// ParseUpstreams parses a retrycap.dev/upstreams value. An empty or all-blank value means no
// upstreams. Blanks around tokens and around ':', '=', '/' and '*' are allowed (not inside a
// number or a duration); an empty entry (",,", a trailing comma), a bad number, an invalid name
// or the same name twice is a *ParseError for the first offending token: a value is accepted
// whole or not at all, never partly. One service under two of its in-cluster spellings
// ("pay.shop" and "pay.shop.svc") is accepted, with a Warning from ParseUpstreamsWarn. Whether
// "pay" and "pay.shop" are one service depends on the workload's namespace, which the value does
// not say.
//
// An upstream written host:port ("cartservice:7070=3") is accepted as upstream host; the port
// is kept in Upstream.Port and ParseUpstreamsWarn reports that it was dropped.
func ParseUpstreams(value string) ([]Upstream, error) {
	ups, _, err := ParseUpstreamsWarn(value)
	return ups, err
}

// ParseUpstreamsWarn is ParseUpstreams that also returns a Warning for every token whose port
// was dropped, and for every in-cluster spelling of a service listed already. The warnings are
// nil when err is not.
func ParseUpstreamsWarn(value string) ([]Upstream, []Warning, error) {
	return ParseUpstreamsWarnIn(value, "")
}

// ParseUpstreamsWarnIn is ParseUpstreamsWarn for a workload of namespace ns: a bare name is then
// a service of ns too, so "payment" and "payment.ns" (or "payment.ns.svc") are one service,
// warned about as the in-cluster spellings are. ns "" is ParseUpstreamsWarn.
func ParseUpstreamsWarnIn(value, ns string) ([]Upstream, []Warning, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil, nil
	}
	var out []Upstream
	var warnings []Warning
	firstCol := map[string]int{}
	type spelling struct {
		name string
		col  int
	}
	firstService := map[string]spelling{}
	start := 0
	for start <= len(value) {
		end := strings.IndexByte(value[start:], ',')
		if end < 0 {
			end = len(value)
		} else {
			end += start
		}
		raw := value[start:end]
		lead := len(raw) - len(strings.TrimLeftFunc(raw, unicode.IsSpace))
		tok := strings.TrimSpace(raw)
		col := start + lead + 1
		if tok == "" {
			// Point at where the entry should have been.
			return nil, nil, &ParseError{Token: "", Column: start + 1, Reason: "empty entry (two commas, or a comma at the start or end)"}
		}
		u, reason := parseToken(tok)
		if reason != "" {
			return nil, nil, &ParseError{Token: tok, Column: col, Reason: reason}
		}
		if c, dup := firstCol[u.Name]; dup {
			return nil, nil, &ParseError{Token: tok, Column: col, Reason: fmt.Sprintf("upstream %q is listed twice (first at column %d)", u.Name, c)}
		}
		// "x.ns", "x.ns.svc" and "x.ns.svc.cluster.local" are one service in any namespace
		// (SplitService): the graph reads both entries as one node with the larger attempts and
		// calls (the worst case; each spelling's own values still run in the proxy), so a value
		// stored so stays accepted, and the dropped reading is said.
		svc, sns, inCluster := SplitService(u.Name)
		if !inCluster && ns != "" && !strings.Contains(u.Name, ".") {
			// A bare name is a service of the workload's namespace, to the graph
			// (UpstreamNode) and to the proxy's resolver alike.
			svc, sns, inCluster = u.Name, ns, true
		}
		if inCluster {
			key := svc + "." + sns
			if first, dup := firstService[key]; dup {
				this, that := "", ""
				if !strings.Contains(u.Name, ".") {
					this = ", the workload's"
				}
				if !strings.Contains(first.name, ".") {
					that = " (a name in the workload's namespace)"
				}
				warnings = append(warnings, Warning{Token: tok, Column: col,
					Message: fmt.Sprintf("upstream %q is service %s of namespace %s%s, listed already as %q%s at column %d: the graph counts one upstream with the larger attempts and calls; write it once", u.Name, svc, sns, this, first.name, that, first.col)})
			} else {
				firstService[key] = spelling{u.Name, col}
			}
		}
		if u.Port != 0 {
			// A host outside the cluster has no Service: its port is one of the ServiceEntry that
			// registers it with Istio (internal/mesh/serviceentry.go), if any.
			picks := "the Service port"
			if _, _, in := SplitService(u.Name); !in && strings.Contains(u.Name, ".") {
				picks = "the port of the ServiceEntry registering the host (Istio)"
			}
			warnings = append(warnings, Warning{Token: tok, Column: col,
				Message: fmt.Sprintf("read as upstream %q: the graph names services, not ports; port %d only picks %s whose protocol decides whether a mesh retries the call", u.Name, u.Port, picks)})
		}
		firstCol[u.Name] = col
		out = append(out, u)
		start = end + 1
	}
	return out, warnings, nil
}

func parseToken(tok string) (Upstream, string) {
	var u Upstream
	name := tok
	if scheme, rest, ok := strings.Cut(name, "://"); ok {
		// An app's configured URL pasted in ("http://order:8080/api=3"): its ':' and '/' would
		// be read as a port and a per-try timeout, and the message would be about those.
		host := rest
		if i := strings.IndexAny(rest, "/=*"); i >= 0 {
			host = rest[:i]
		}
		return u, fmt.Sprintf("%s:// makes it a URL: write the service or host alone (%q), then =ATTEMPTS, /PER-TRY-TIMEOUT, *CALLS", scheme, host)
	}
	if i := strings.IndexByte(name, '*'); i >= 0 {
		n, ok := parseInt(name[i+1:], MinCalls, MaxCalls)
		if !ok {
			return u, fmt.Sprintf("calls must be an integer %d..%d", MinCalls, MaxCalls) + nonASCII(name[i+1:])
		}
		u.Calls = n
		name = name[:i]
	}
	if i := strings.IndexByte(name, '/'); i >= 0 {
		if n := strings.Count(name, "/"); n > 1 {
			// "payment=3/2s/1s": said as such, not as a malformed duration "2s/1s".
			return u, fmt.Sprintf("one per-try timeout at most: %q has %d", name[i:], n)
		}
		d, reason := parseTimeout(name[i+1:])
		if reason != "" {
			return u, reason + nonASCII(name[i+1:])
		}
		u.PerTryTimeout = d
		name = name[:i]
	}
	if i := strings.IndexByte(name, '='); i >= 0 {
		n, ok := parseInt(name[i+1:], MinAttempts, MaxAttempts)
		if !ok {
			return u, fmt.Sprintf("attempts must be an integer %d..%d", MinAttempts, MaxAttempts) + nonASCII(name[i+1:])
		}
		u.Attempts = n
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		n, ok := parseInt(name[i+1:], MinPort, MaxPort)
		if !ok {
			return u, fmt.Sprintf("port must be an integer %d..%d", MinPort, MaxPort) + nonASCII(name[i+1:])
		}
		u.Port = n
		name = name[:i]
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return u, "missing service name"
	}
	if r := ValidateHost(name); r != "" {
		return u, r
	}
	u.Name = name
	return u, ""
}

// nonASCII names the first non-ASCII character of a number or duration the grammar refused, as
// ValidateLabel does for names: a fullwidth "３" or an Arabic-Indic "٣" looks like the digit it
// is not, and "must be an integer" alone sends the reader looking at the wrong thing.
func nonASCII(s string) string {
	for _, r := range s {
		if r == 'µ' || r == 'μ' {
			// Go's Duration.String writes microseconds so ("1.5µs"): a copy of its output.
			return fmt.Sprintf(", and %q (U+%04X) is not ASCII: write microseconds as \"us\"", r, r)
		}
		if r >= utf8.RuneSelf {
			return fmt.Sprintf(", and %q (U+%04X) is not ASCII (a look-alike or an invisible character)", r, r)
		}
	}
	return ""
}

// parseTimeout reads a per-try timeout: one or more groups of decimal digits and a unit (ns, us,
// ms, s, m, h), as the policy's durations are written ("2s", "1500ms", "1m30s"), between
// MinPerTryTimeout and MaxPerTryTimeout. No sign, no fraction (the policy's CRD takes one, as a
// typed client writes it back; an annotation is only ever written by hand), no blank inside.
func parseTimeout(s string) (time.Duration, string) {
	const want = "per-try timeout must be a duration of digits and units ns, us, ms, s, m, h (\"500ms\", \"2s\", \"1m30s\")"
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, want
	}
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		k := j
		for k < len(s) && (s[k] < '0' || s[k] > '9') {
			k++
		}
		switch s[j:k] {
		case "ns", "us", "ms", "s", "m", "h":
		default:
			return 0, want
		}
		if j == i {
			return 0, want
		}
		i = k
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinPerTryTimeout || d > MaxPerTryTimeout {
		// The grammar held: a parse error is a value past Go's longest duration ("9999999h"),
		// out of range like "2h", not malformed.
		return 0, fmt.Sprintf("per-try timeout %s is out of range %s..%s", s, MinPerTryTimeout, MaxPerTryTimeout)
	}
	return d, ""
}

// FormatTimeout writes d in the largest unit that divides it exactly ("2s", "1500ms", "90s"),
// a form parseTimeout reads back to d.
func FormatTimeout(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// parseInt accepts only decimal digits (blanks around them allowed): no sign, no '+'.
func parseInt(s string, lo, hi int) (int32, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return int32(n), true
}

// ValidateHost checks an upstream name: dot-separated DNS-1123 labels (a service, name.namespace
// or an external host), lower case. It returns "" when valid, else the reason.
func ValidateHost(name string) string {
	if len(name) > 253 {
		return "name longer than 253 characters"
	}
	// An empty label is a stray dot: say which, as "empty label" does not show where. A
	// trailing one is DNS's absolute form ("api.example.com."), which resolvers and curl take.
	const host = "%q is not a service name, name.namespace or host: %s"
	switch {
	case name == "":
		// ValidateLabel's "empty label" below.
	case strings.HasSuffix(name, "."):
		return fmt.Sprintf(host, name, fmt.Sprintf("a trailing dot (DNS's absolute form) is not written here: %q", strings.TrimRight(name, ".")))
	case strings.HasPrefix(name, "."):
		return fmt.Sprintf(host, name, "it starts with a dot")
	case strings.Contains(name, ".."):
		return fmt.Sprintf(host, name, "two dots in a row")
	}
	for _, l := range strings.Split(name, ".") {
		if r := ValidateLabel(l); r != "" {
			return fmt.Sprintf("%q is not a service name, name.namespace or host: %s", name, r)
		}
	}
	return ""
}

// ValidateLabel checks a DNS-1123 label (a service name). It returns "" when valid, else the
// reason.
func ValidateLabel(l string) string {
	if l == "" {
		return "empty label"
	}
	if len(l) > 63 {
		return "label longer than 63 characters"
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			if c >= utf8.RuneSelf {
				// A look-alike ("pаyment", Cyrillic а) or an invisible character (a zero-width
				// space) reads as a valid name: say which one it is.
				r, _ := utf8.DecodeRuneInString(l[i:])
				return fmt.Sprintf("only lower-case letters, digits and '-' are allowed, and %q (U+%04X) is not ASCII (a look-alike or an invisible character)", r, r)
			}
			return "only lower-case letters, digits and '-' are allowed"
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return "must start and end with a letter or digit"
	}
	return ""
}

// FormatUpstreams renders upstreams canonically ("order=3, inventory=2*4, payment=3/2s"): a
// port, attempts, a per-try timeout (in FormatTimeout's form) and calls are written only when given (non-zero), so ParseUpstreams(FormatUpstreams(x)) == x for any x
// that ParseUpstreams returned.
func FormatUpstreams(ups []Upstream) string {
	var b strings.Builder
	for i, u := range ups {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(u.Name)
		if u.Port != 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(int(u.Port)))
		}
		if u.Attempts != 0 {
			b.WriteByte('=')
			b.WriteString(strconv.Itoa(int(u.Attempts)))
		}
		if u.PerTryTimeout != 0 {
			b.WriteByte('/')
			b.WriteString(FormatTimeout(u.PerTryTimeout))
		}
		if u.Calls != 0 {
			b.WriteByte('*')
			b.WriteString(strconv.Itoa(int(u.Calls)))
		}
	}
	return b.String()
}
