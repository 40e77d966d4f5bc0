package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/template"
	"gopkg.in/yaml.v3"
)

const (
	rulesFile     = "config/prometheus/rules.yaml"
	dashboardFile = "config/grafana/retrycap-dashboard.json"
)

// targetLabels are the labels Prometheus gives every series from a PodMonitor's target (on top
// of the metric's own).
var targetLabels = []string{"namespace", "pod", "container", "endpoint", "instance", "job"}

// metric is one metric the code exports.
type metric struct {
	kind   string // Counter, Gauge, Histogram, Summary
	labels []string
	file   string
}

// repoRoot is the main module's directory, two levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(data, []byte("module github.com/retrycap/retrycap\n")) {
		t.Fatalf("%s is not the retrycap module's root: %v", root, err)
	}
	return root
}

var (
	optsStart   = regexp.MustCompile(`prometheus\.(Counter|Gauge|Histogram|Summary)Opts\{`)
	nameField   = regexp.MustCompile(`\bName:\s*"(retrycap_[a-z0-9_]+)"`)
	constLabels = regexp.MustCompile(`ConstLabels:\s*prometheus\.Labels\{([^}]*)\}`)
	quoted      = regexp.MustCompile(`"([a-zA-Z_][a-zA-Z0-9_]*)"`)
	labelsAfter = regexp.MustCompile(`^\s*,\s*\[\]string\{([^}]*)\}`)
	anyName     = regexp.MustCompile(`Name:\s*"retrycap_`)
)

// exportedMetrics reads the metrics the code exports from the main module's Go sources (not
// tests, not nested modules): every prometheus.*Opts literal with a Name "retrycap_...", its
// ConstLabels and the label names of the Vec it builds.
func exportedMetrics(t *testing.T) map[string]metric {
	t.Helper()
	root := repoRoot(t)
	out := map[string]metric{}
	names := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == ".git" || d.Name() == "testdata" || fileExists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(data)
		names += len(anyName.FindAllStringIndex(src, -1))
		for _, loc := range optsStart.FindAllStringSubmatchIndex(src, -1) {
			kind := src[loc[2]:loc[3]]
			end := matchingBrace(src, loc[1]-1)
			if end < 0 {
				return fmt.Errorf("%s: unbalanced braces after offset %d", path, loc[0])
			}
			body := src[loc[1]:end]
			n := nameField.FindStringSubmatch(body)
			if n == nil {
				continue
			}
			m := metric{kind: kind, file: strings.TrimPrefix(path, root+"/")}
			if c := constLabels.FindStringSubmatch(body); c != nil {
				for _, q := range regexp.MustCompile(`"([a-zA-Z_][a-zA-Z0-9_]*)"\s*:`).FindAllStringSubmatch(c[1], -1) {
					m.labels = append(m.labels, q[1])
				}
			}
			if l := labelsAfter.FindStringSubmatch(src[end+1:]); l != nil {
				for _, q := range quoted.FindAllStringSubmatch(l[1], -1) {
					m.labels = append(m.labels, q[1])
				}
			}
			if prev, dup := out[n[1]]; dup && (prev.kind != m.kind || !slices.Equal(prev.labels, m.labels)) {
				return fmt.Errorf("%s is defined twice, differently (%s and %s)", n[1], prev.file, m.file)
			}
			out[n[1]] = m
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every `Name: "retrycap_` must be one this reader understood, or the set is incomplete.
	if names != len(out) {
		t.Fatalf("the sources name %d retrycap_ metrics, the reader found %d: %v", names, len(out), slices.Sorted(maps.Keys(out)))
	}
	return out
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// matchingBrace returns the offset of the brace closing the one at open, skipping string
// literals.
func matchingBrace(src string, open int) int {
	depth := 0
	for i := open; i < len(src); i++ {
		switch src[i] {
		case '"':
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '`':
			for i++; i < len(src) && src[i] != '`'; i++ {
			}
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// TestExportedMetrics pins the reader to the metrics the code is known to export, so a change in
// how the code declares them cannot silently empty the set the other tests check against.
func TestExportedMetrics(t *testing.T) {
	got := exportedMetrics(t)
	want := map[string][]string{
		"retrycap_policy_amplification":              {"namespace", "policy"},
		"retrycap_policy_within_cap":                 {"namespace", "policy"},
		"retrycap_proxy_requests_total":              {"upstream", "code"},
		"retrycap_proxy_attempts_total":              {"upstream"},
		"retrycap_proxy_retries_total":               {"upstream"},
		"retrycap_proxy_retries_denied_total":        {"upstream", "reason"},
		"retrycap_proxy_upstream_latency_seconds":    {"upstream"},
		"retrycap_proxy_tunnels_total":               {"kind"},
		"retrycap_proxy_loop_handoffs_total":         {"reason"},
		"retrycap_proxy_loop_panics_total":           nil,
		"retrycap_proxy_in_flight":                   nil,
		"retrycap_proxy_retry_budget_available":      {"upstream"},
		"retrycap_proxy_breaker_state":               {"upstream"},
		"retrycap_proxy_access_log_dropped_total":    nil,
		"retrycap_proxy_h2_requests_total":           {"upstream", "protocol", "code"},
		"retrycap_proxy_h2_attempts_total":           {"upstream", "protocol"},
		"retrycap_proxy_h2_retries_total":            {"upstream", "protocol"},
		"retrycap_proxy_h2_resent_total":             {"upstream", "protocol"},
		"retrycap_proxy_h2_retries_denied_total":     {"upstream", "protocol", "reason"},
		"retrycap_proxy_h2_upstream_latency_seconds": {"upstream", "protocol"},
		"retrycap_proxy_h2_connections_total":        {"kind"},
	}
	for name, labels := range want {
		m, ok := got[name]
		if !ok {
			t.Errorf("%s: not found in the sources", name)
			continue
		}
		if !slices.Equal(m.labels, labels) {
			t.Errorf("%s (%s): labels %q, want %q", name, m.file, m.labels, labels)
		}
	}
	for name, m := range got {
		if _, ok := want[name]; !ok {
			t.Logf("%s (%s, %s) is new: the dashboard test requires a panel for it", name, m.kind, m.file)
		}
	}
	if got["retrycap_proxy_upstream_latency_seconds"].kind != "Histogram" {
		t.Errorf("retrycap_proxy_upstream_latency_seconds: %+v, want a Histogram", got["retrycap_proxy_upstream_latency_seconds"])
	}
}

// selectorUse is one metric a PromQL expression reads, with the labels it matches on or groups
// by.
type selectorUse struct {
	metric string
	labels []string
}

var promqlParser = parser.NewParser(parser.Options{})

// uses parses expr and returns every metric it selects with the labels used on it: its own
// matchers, the grouping labels of the aggregations above it and the on/ignoring labels of the
// binary operations above it.
func uses(expr string) ([]selectorUse, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []selectorUse
	var walk func(n parser.Node, above []string)
	walk = func(n parser.Node, above []string) {
		switch n := n.(type) {
		case *parser.VectorSelector:
			u := selectorUse{metric: n.Name, labels: slices.Clone(above)}
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName {
					if u.metric == "" && m.Type == labels.MatchEqual {
						u.metric = m.Value
					}
					continue
				}
				u.labels = append(u.labels, m.Name)
			}
			out = append(out, u)
			return
		case *parser.AggregateExpr:
			above = append(slices.Clone(above), n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				above = append(slices.Clone(above), n.VectorMatching.MatchingLabels...)
			}
		}
		for _, c := range parser.Children(n) {
			walk(c, above)
		}
	}
	walk(e, nil)
	return out, nil
}

// checkUses fails the test for a metric the code does not export or a label it does not carry,
// and records the metrics read in seen.
func checkUses(t *testing.T, where, expr string, exported map[string]metric, seen map[string]bool) {
	t.Helper()
	us, err := uses(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	if len(us) == 0 {
		t.Errorf("%s: %q reads no metric", where, expr)
	}
	for _, u := range us {
		base, m, ok := resolve(u.metric, exported)
		if !ok {
			t.Errorf("%s: %q reads %q, which the code does not export (it exports %s)", where, expr, u.metric, strings.Join(slices.Sorted(maps.Keys(exported)), ", "))
			continue
		}
		seen[base] = true
		allowed := append(slices.Clone(targetLabels), m.labels...)
		if u.metric != base && strings.HasSuffix(u.metric, "_bucket") {
			allowed = append(allowed, "le")
		}
		for _, l := range u.labels {
			if !slices.Contains(allowed, l) {
				t.Errorf("%s: %q uses label %q on %s, which has only %q", where, expr, l, u.metric, allowed)
			}
		}
	}
}

// resolve maps a series name to the exported metric: itself, or a histogram's or summary's
// _bucket, _sum and _count series.
func resolve(name string, exported map[string]metric) (string, metric, bool) {
	if m, ok := exported[name]; ok {
		return name, m, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if !found {
			continue
		}
		m, ok := exported[base]
		if ok && (m.kind == "Histogram" || (m.kind == "Summary" && suffix != "_bucket")) {
			return base, m, true
		}
	}
	return "", metric{}, false
}

// prometheusRule is config/prometheus/rules.yaml: a PrometheusRule whose spec is a Prometheus
// rule file.
type prometheusRule struct {
	APIVersion string    `yaml:"apiVersion"`
	Kind       string    `yaml:"kind"`
	Spec       yaml.Node `yaml:"spec"`
}

// loadRules parses the rules with Prometheus' own rule-file parser (strict: unknown fields,
// invalid PromQL, invalid label names and invalid annotation templates are errors).
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s: %s %s, want monitoring.coreos.com/v1 PrometheusRule", rulesFile, pr.APIVersion, pr.Kind)
	}
	spec, err := yaml.Marshal(&pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promqlParser, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("%s: %v", rulesFile, err)
	}
	if groups == nil {
		t.FailNow()
	}
	return groups
}

func TestRules(t *testing.T) {
	groups := loadRules(t)
	exported := exportedMetrics(t)
	seen := map[string]bool{}
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: rule %q is not an alert", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			checkUses(t, g.Name+"/"+r.Alert, r.Expr, exported, seen)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: labels %v annotations %v, want a severity, a summary and a description", r.Alert, r.Labels, slices.Sorted(maps.Keys(r.Annotations)))
			}
		}
	}
	want := []string{"RetrycapAmplificationOverCap", "RetrycapBreakerOpen", "RetrycapRetriesDeniedByBudget", "RetrycapProxyLoopPanics"}
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %q, want %q", alerts, want)
	}
}

// TestAlertsFire evaluates each alert's expression with Prometheus' engine over series shaped
// like the ones the code exports (and the target labels a PodMonitor adds): it selects exactly
// the cases it is about and nothing else.
func TestAlertsFire(t *testing.T) {
	exprs := map[string]string{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	cases := map[string]struct{ load, at, want string }{
		// shop/tight is over its cap, shop/loose within it.
		"RetrycapAmplificationOverCap": {
			load: `retrycap_policy_within_cap{namespace="shop", policy="tight", pod="retrycap-controller-manager-0"} 1 1 0x10
retrycap_policy_within_cap{namespace="shop", policy="loose", pod="retrycap-controller-manager-0"} 1x12
retrycap_policy_amplification{namespace="shop", policy="tight", pod="retrycap-controller-manager-0"} 27x12`,
			at:   "10m",
			want: `{namespace="shop", policy="tight"} 0`,
		},
		// Two proxies not closed to payments (open, half-open); search closed.
		"RetrycapBreakerOpen": {
			load: `retrycap_proxy_breaker_state{namespace="shop", pod="front-1", upstream="payments"} 0 1x10
retrycap_proxy_breaker_state{namespace="shop", pod="front-2", upstream="payments"} 0 2x10
retrycap_proxy_breaker_state{namespace="shop", pod="front-1", upstream="search"} 0x10`,
			at:   "5m",
			want: `{namespace="shop", upstream="payments"} 2`,
		},
		// One denial per second by the budget to payments; the breaker's denials and a flat
		// budget counter to search do not count.
		"RetrycapRetriesDeniedByBudget": {
			load: `retrycap_proxy_retries_denied_total{namespace="shop", pod="front-1", upstream="payments", reason="budget"} 0+60x20
retrycap_proxy_retries_denied_total{namespace="shop", pod="front-1", upstream="payments", reason="breaker"} 0+60x20
retrycap_proxy_retries_denied_total{namespace="shop", pod="front-1", upstream="search", reason="budget"} 5x20`,
			at:   "15m",
			want: `{namespace="shop", upstream="payments"} 1`,
		},
		// front-1 contained one panic; front-2 none.
		"RetrycapProxyLoopPanics": {
			load: `retrycap_proxy_loop_panics_total{namespace="shop", pod="front-1"} 0 0 0 1x10
retrycap_proxy_loop_panics_total{namespace="shop", pod="front-2"} 0x12`,
			at:   "10m",
			want: `{namespace="shop", pod="front-1"} 1`,
		},
	}
	if !slices.Equal(slices.Sorted(maps.Keys(cases)), slices.Sorted(maps.Keys(exprs))) {
		t.Fatalf("cases for %q, alerts %q", slices.Sorted(maps.Keys(cases)), slices.Sorted(maps.Keys(exprs)))
	}
	for alert, c := range cases {
		t.Run(alert, func(t *testing.T) {
			engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
			script := fmt.Sprintf("load 1m\n%s\n\neval instant at %s %s\n  %s\n\n# Nothing before the data says so.\neval instant at 0m %s\n",
				indent(c.load), c.at, exprs[alert], c.want, exprs[alert])
			promqltest.RunTest(t, script, engine)
		})
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// grafanaVars replaces Grafana's interval variables, which are not PromQL, before parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m", "$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")

// labelValues is a Grafana variable query: label_values(<selector>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

type dashboard struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
}

// TestDashboard checks every query of the dashboard (panels and variables) with the PromQL
// parser: it names only metrics the code exports, with labels they carry, and every exported
// metric has a panel.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID != "retrycap" {
		t.Errorf("uid %q", d.UID)
	}
	exported := exportedMetrics(t)
	seen := map[string]bool{}
	queries := 0
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want the dashboard's Prometheus variable", p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				queries++
				checkUses(t, "panel "+p.Title, grafanaVars.Replace(tg.Expr), exported, seen)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query %s: %v", v.Name, v.Query, err)
			continue
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(<selector>, <label>)", v.Name, q.Query)
			continue
		}
		queries++
		checkUses(t, "variable "+v.Name, m[1], exported, seen)
		base, metric, ok := resolve(strings.SplitN(m[1], "{", 2)[0], exported)
		if ok && !slices.Contains(append(slices.Clone(targetLabels), metric.labels...), m[2]) {
			t.Errorf("variable %s: %s has no label %q", v.Name, base, m[2])
		}
	}
	if queries < len(exported) {
		t.Errorf("%d queries for %d metrics", queries, len(exported))
	}
	for name, m := range exported {
		if !seen[name] {
			t.Errorf("%s (%s) is exported but no panel of %s shows it", name, m.file, dashboardFile)
		}
	}
}

// TestAlertSummariesPerPolicyKind expands the over-cap alert's summary as the rule manager does
// (its $labels prelude, Prometheus' template package) for a RetryPolicy's series and for a
// ClusterRetryPolicy's (cluster-scoped: namespace="").
func TestAlertSummariesPerPolicyKind(t *testing.T) {
	var summary string
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "RetrycapAmplificationOverCap" {
				summary = r.Annotations["summary"]
			}
		}
	}
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"namespace": "shop", "policy": "checkout"}, "RetryPolicy shop/checkout is over its retry cap."},
		{map[string]string{"namespace": "", "policy": "teams-chain"}, "ClusterRetryPolicy teams-chain is over its retry cap."},
	} {
		data := template.AlertTemplateData(c.labels, nil, "", promql.Sample{F: 0})
		e := template.NewTemplateExpander(context.Background(), "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"+summary,
			"summary", data, model.Time(0), nil, nil, nil)
		got, err := e.Expand()
		if err != nil {
			t.Fatalf("%v: %v", c.labels, err)
		}
		if got != c.want {
			t.Errorf("%v: summary %q, want %q", c.labels, got, c.want)
		}
	}
}
