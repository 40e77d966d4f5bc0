package promquery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/observed"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// Defaults of the manager's flags.
const (
	DefaultWindow      = 5 * time.Minute
	DefaultTimeout     = 10 * time.Second
	DefaultSeriesLimit = 10000
	DefaultCallerLabel = "service"
	// DefaultMaxAnswerBytes bounds one answer's body (64 MiB): at the default series limit an
	// answer is a few MiB (a series' labels and value are a few hundred bytes), so this leaves
	// room for long label values and for a raised limit while keeping a hostile or runaway
	// answer (an old Prometheus that ignores the limit parameter, a proxy streaming something
	// else) from growing the manager's memory without end: beyond it the answer is refused.
	// --prometheus-max-answer-size raises it for a cluster whose answers are larger.
	DefaultMaxAnswerBytes = 64 << 20
	// MaxIncrease is the largest counter increase an answer may hold (telemetry.MaxIncrease,
	// 2^53): a larger value (like NaN, an infinity or a negative increase, which increase()
	// never returns for a counter) says the answer is not what was asked, and it is refused.
	MaxIncrease = telemetry.MaxIncrease
)

// Options configure a Client.
type Options struct {
	// URL is Prometheus' base URL (http://prometheus.monitoring:9090).
	URL string
	// Window is the range the counters' increase is taken over.
	Window time.Duration
	// Timeout bounds each query: the HTTP request and Prometheus' own evaluation.
	Timeout time.Duration
	// SeriesLimit is the most series one query may return; a query that reaches it is an
	// error (its edges would be incomplete), not a silent truncation.
	SeriesLimit uint64
	// CallerLabel is the label that names the calling service on the scraped series: the proxy
	// does not carry its --service in its metrics, so the scrape configuration has to add it
	// (docs/observe.md).
	CallerLabel string
	// Auth are the credentials and the CA Prometheus is queried with (none by default).
	Auth Auth
	// MaxAnswerBytes bounds one answer's body (--prometheus-max-answer-size); DefaultMaxAnswerBytes
	// when 0, an error when negative.
	MaxAnswerBytes int64
	// ReplicaLabels are the labels that tell an HA pair's replicas apart in the answers of a
	// querier that does not deduplicate them (--prometheus-replica-label);
	// telemetry.ReplicaLabels when nil.
	ReplicaLabels []string
	// IstioCluster is the cluster whose Istio series Graph reads when Prometheus holds several
	// (telemetry.Options.IstioCluster).
	IstioCluster string
	// ClusterLabels name a series' cluster (--prometheus-cluster-label; telemetry.ClusterLabels
	// when nil), Cluster the one whose series Series and Graph read when Prometheus holds
	// several (--prometheus-cluster, discover's --cluster): "" refuses several.
	ClusterLabels []string
	Cluster       string
}

// Auth is how a Prometheus that asks for credentials, or serves TLS under a private CA, is
// queried (the --prometheus-* credential flags). Files are read by prometheus/common's HTTP
// client, as Prometheus reads its own scrape credentials: the token and the password on every
// request (a rotated ServiceAccount token or Secret is picked up without a restart), the CA when
// the client is made. A bearer token and basic auth are exclusive.
type Auth struct {
	// BearerTokenFile holds a token sent as "Authorization: Bearer <token>" (a projected
	// ServiceAccount token for kube-rbac-proxy or OpenShift's Thanos querier).
	BearerTokenFile string
	// Username and PasswordFile are HTTP basic auth (Prometheus' own --web.config.file
	// basic_auth_users); a username without a password file is an error.
	Username, PasswordFile string
	// CAFile is the PEM bundle that verifies an https Prometheus' certificate (besides none:
	// the system's roots are not added to it, as Prometheus' tls_config.ca_file does).
	CAFile string
}

// httpConfig is a's prometheus/common client configuration; an inconsistent one is an error
// naming the flags.
func (a Auth) httpConfig() (config.HTTPClientConfig, error) {
	hc := config.HTTPClientConfig{FollowRedirects: true, EnableHTTP2: true, TLSConfig: config.TLSConfig{CAFile: a.CAFile}}
	switch {
	case a.BearerTokenFile != "" && (a.Username != "" || a.PasswordFile != ""):
		return hc, errors.New("--prometheus-bearer-token-file and --prometheus-username/--prometheus-password-file: give one kind of credentials, not both")
	case a.BearerTokenFile != "":
		hc.Authorization = &config.Authorization{Type: "Bearer", CredentialsFile: a.BearerTokenFile}
	case a.Username != "" && a.PasswordFile == "":
		return hc, fmt.Errorf("--prometheus-username %q: --prometheus-password-file is required with it", a.Username)
	case a.Username == "" && a.PasswordFile != "":
		return hc, fmt.Errorf("--prometheus-password-file %q: --prometheus-username is required with it", a.PasswordFile)
	case a.Username != "":
		hc.BasicAuth = &config.BasicAuth{Username: a.Username, PasswordFile: a.PasswordFile}
	}
	if err := hc.Validate(); err != nil {
		return hc, fmt.Errorf("prometheus credentials: %w", err)
	}
	return hc, nil
}

// Client queries one Prometheus for the per-edge counters.
type Client struct {
	api   v1.API
	opts  Options
	shown string // opts.URL redacted (RedactURL)
}

// New checks the options and makes a client.
func New(o Options) (*Client, error) {
	// A password in the URL (http://user:password@host, basic auth that net/http sends) is
	// never said: every message, the conditions and the manager's log name the URL redacted.
	shown := RedactURL(o.URL)
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus-url %q: want an http or https URL with a host", shown)
	}
	// url.Parse takes any digits as a port: said here, not at the first dial.
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("--prometheus-url %q: port %s: want 1..65535", shown, p)
		}
	}
	// prometheus/common's credentials give way to an Authorization header already set, and
	// net/http sets the URL's first: with both, the flags would be ignored without a word.
	if u.User != nil && (o.Auth.BearerTokenFile != "" || o.Auth.Username != "" || o.Auth.PasswordFile != "") {
		return nil, fmt.Errorf("--prometheus-url %q holds credentials, and so do --prometheus-bearer-token-file/--prometheus-username: give them in one place", shown)
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SeriesLimit == 0 {
		o.SeriesLimit = DefaultSeriesLimit
	}
	if o.CallerLabel == "" {
		o.CallerLabel = DefaultCallerLabel
	}
	if o.MaxAnswerBytes < 0 {
		return nil, fmt.Errorf("%s %d: want a size above 0 bytes", MaxAnswerSizeFlag, o.MaxAnswerBytes)
	}
	if o.MaxAnswerBytes == 0 {
		o.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if !model.LegacyValidation.IsValidLabelName(o.CallerLabel) {
		return nil, fmt.Errorf("--prometheus-caller-label %q: not a Prometheus label name", o.CallerLabel)
	}
	if err := telemetry.CheckReplicaLabels(o.ReplicaLabels, o.CallerLabel); err != nil {
		return nil, err
	}
	if err := telemetry.CheckClusterLabels(o.ClusterLabels, o.ReplicaLabels, o.CallerLabel); err != nil {
		return nil, err
	}
	hc, err := o.Auth.httpConfig()
	if err != nil {
		return nil, err
	}
	// A client of its own: the HTTP timeout bounds a Prometheus that accepts and never answers
	// even if a caller passes a context without a deadline.
	httpc, err := config.NewClientFromConfig(hc, "retrycap")
	if err != nil {
		if o.Auth.CAFile != "" {
			return nil, fmt.Errorf("--prometheus-ca-file %q: %w", o.Auth.CAFile, err)
		}
		return nil, fmt.Errorf("--prometheus-url %q: %w", shown, err)
	}
	httpc.Timeout = o.Timeout
	httpc.CheckRedirect = checkRedirect
	httpc.Transport = &checkedTransport{next: httpc.Transport, max: o.MaxAnswerBytes}
	c, err := api.NewClient(api.Config{Address: o.URL, Client: httpc})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url %q: %w", shown, err)
	}
	return &Client{api: v1.NewAPI(statusClient{c}), opts: o, shown: shown}, nil
}

// URL is the Prometheus URL for messages, its password (if any) replaced by "xxxxx".
func (c *Client) URL() string { return c.shown }

// RedactURL is raw with the password of its user information replaced by "xxxxx"
// (url.URL.Redacted) and so is every query parameter's value, also when raw does not parse as a
// URL: what a message may say of a --prometheus-url. A query string on a Prometheus URL is where
// a proxy in front of it takes a token (?token=, ?api_key=); the names are kept (they say which
// parameter), the values are not, whatever the name: a list of "secret-looking" names would
// miss the next proxy's.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return redacted(u)
	}
	// The authority is what follows "//" up to the first "/", "?" or "#"; its user
	// information what precedes its last "@"; the password what follows the user's ":".
	out := raw
	if _, rest, ok := strings.Cut(raw, "//"); ok {
		start := len(raw) - len(rest)
		if end := strings.IndexAny(rest, "/?#"); end >= 0 {
			rest = rest[:end]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				out = raw[:start+colon+1] + "xxxxx" + raw[start+at:]
			}
		}
	}
	if before, query, ok := strings.Cut(out, "?"); ok {
		query, fragment, hasFragment := strings.Cut(query, "#")
		out = before + "?" + redactQuery(query)
		if hasFragment {
			out += "#" + fragment
		}
	}
	return out
}

// redacted is u for a message: its password and its query's values replaced by "xxxxx".
func redacted(u *url.URL) string {
	if u.RawQuery == "" {
		return u.Redacted()
	}
	c := *u
	c.RawQuery = redactQuery(u.RawQuery)
	return c.Redacted()
}

// redactQuery replaces each value of a raw query string by "xxxxx", keeping the names and their
// order as written.
func redactQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		if name, _, ok := strings.Cut(p, "="); ok {
			parts[i] = name + "=xxxxx"
		}
	}
	return strings.Join(parts, "&")
}

// Window is the query window.
func (c *Client) Window() time.Duration { return c.opts.Window }

// Queries are the PromQL queries Series runs, in order, for a window and a caller label:
// attempts and calls for retrycap-proxy's counters, Envoy's total and retries, then Linkerd's
// route requests and retries (HTTP and gRPC routes; only those whose parent is a Service).
func Queries(window time.Duration, caller string) []string {
	return QueriesFor(window, caller, nil)
}

// QueriesFor is Queries keeping replicaLabels apart (telemetry.ReplicaLabels when nil).
func QueriesFor(window time.Duration, caller string, replicaLabels []string) []string {
	return QueriesWith(window, caller, replicaLabels, nil)
}

// QueriesWith is QueriesFor keeping clusterLabels apart too (telemetry.ClusterLabels when nil):
// Series refuses several clusters' series or reads one (telemetry.OneClusterBy).
func QueriesWith(window time.Duration, caller string, replicaLabels, clusterLabels []string) []string {
	if len(replicaLabels) == 0 {
		replicaLabels = telemetry.ReplicaLabels
	}
	if len(clusterLabels) == 0 {
		clusterLabels = telemetry.ClusterLabels
	}
	replicaLabels = append(append(append([]string(nil), replicaLabels...), clusterLabels...), telemetry.RenamedLabels(clusterLabels)...)
	by := "namespace, " + caller
	// The replica labels kept apart, as telemetry.Queries does (one query for both paths);
	// Join sums them back per edge, as before: a ratio of attempts over calls is the same
	// summed over replicas, and summing never pairs one replica's attempts with another's calls.
	rep := ", " + strings.Join(replicaLabels, ", ")
	// Every source's series are grouped by exported_namespace too, as in the graph's queries:
	// a series federated from another Prometheus without honor_labels keeps its caller's
	// namespace there (the scrape's own namespace label takes its place), and Join refuses to
	// read it in the scrape target's. The proxies' and Envoy's namespace is the scrape's as
	// Linkerd's is; before, only Linkerd's queries kept the label apart.
	by += ", " + telemetry.LinkerdExportedNamespace
	// Each counter is read by telemetry.Calls, the graph's reader (discover's, GraphComplete's):
	// a series born inside the window counted from zero, the others by increase(). Before, these
	// six were increase()'s alone, so the manager's figure for an edge born inside the window
	// (its calls before its first scrape lost) differed from discover's for the same series.
	calls := func(sel string) string { return telemetry.Calls(sel, window) }
	return []string{
		fmt.Sprintf("sum by (%s, upstream%s) %s", by, rep, calls("retrycap_proxy_attempts_total")),
		fmt.Sprintf("sum by (%s, upstream%s) %s", by, rep, calls("retrycap_proxy_requests_total")),
		fmt.Sprintf(`sum by (%s, envoy_cluster_name%s) %s`, by, rep, calls(`envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}`)),
		fmt.Sprintf(`sum by (%s, envoy_cluster_name%s) %s`, by, rep, calls(`envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}`)),
		fmt.Sprintf(`sum by (%s, parent_namespace, parent_name%s) %s`, by, rep, calls(`{__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}`)),
		fmt.Sprintf(`sum by (%s, parent_namespace, parent_name%s) %s`, by, rep, calls(`{__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}`)),
	}
}

// Vectors are the answers to Queries, in their order.
type Vectors struct {
	Attempts, Calls                 model.Vector
	EnvoyTotal, EnvoyRetry          model.Vector
	LinkerdRequests, LinkerdRetries model.Vector
}

// Series runs the queries at now and joins their results into per-edge series. Any error (the
// connection, a timeout, a bad answer, a query at the series limit) fails the whole call: a
// partial set of edges would make a partial product look like the worst path.
func (c *Client) Series(ctx context.Context, now time.Time) ([]observed.Series, error) {
	qs := QueriesWith(c.opts.Window, c.opts.CallerLabel, c.opts.ReplicaLabels, c.opts.ClusterLabels)
	var vs Vectors
	dsts := []*model.Vector{&vs.Attempts, &vs.Calls, &vs.EnvoyTotal, &vs.EnvoyRetry, &vs.LinkerdRequests, &vs.LinkerdRetries}
	all := make([]model.Vector, len(dsts))
	for i := range dsts {
		v, err := c.query(ctx, qs[i], now)
		if err != nil {
			return nil, err
		}
		all[i] = v
	}
	// Several clusters' series are refused, or one cluster's read (the others' are not this
	// cluster's policies' edges): Join would add them per caller name.
	all, _, err := telemetry.OneClusterBy(all, c.opts.ClusterLabels, c.opts.Cluster)
	if err != nil {
		return nil, err
	}
	for i, dst := range dsts {
		*dst = all[i]
	}
	return Join(vs, c.opts.CallerLabel), nil
}

func (c *Client) query(ctx context.Context, q string, now time.Time) (model.Vector, error) {
	checked, err := c.queryChecked(ctx, q, now)
	return checked.Vector(), err
}

// queryChecked runs q and checks its answer's series once (telemetry.CheckVector): Graph hands
// them to telemetry.Read as checked, Series joins them.
func (c *Client) queryChecked(ctx context.Context, q string, now time.Time) (telemetry.Checked, error) {
	var none telemetry.Checked
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	val, warnings, _, err := c.api.Query(ctx, q, now, v1.WithTimeout(c.opts.Timeout), v1.WithLimit(c.opts.SeriesLimit))
	if err != nil {
		// The query's context and the HTTP client's timeout are the same duration, and which
		// fires first is a race ("context deadline exceeded", net/http's "request canceled
		// (Client.Timeout ...)"): one message for both.
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return none, fmt.Errorf("query %s: no whole answer within %v (--prometheus-timeout): %w", q, c.opts.Timeout, context.DeadlineExceeded)
		}
		return none, fmt.Errorf("query %s: %w", q, describe(unwrapURLError(err), strings.TrimSuffix(c.shown, "/")+"/api/v1/query", c.opts.Timeout))
	}
	// At the limit Prometheus also warns ("results truncated due to limit"): the limit is
	// named first, with the flag that raises it.
	if v, ok := val.(model.Vector); ok && uint64(len(v)) >= c.opts.SeriesLimit {
		// Over it: a server that ignores the limit parameter (an older Prometheus, a look-alike)
		// answered whole; the count says how far to raise the flag.
		what := "the limit"
		if uint64(len(v)) > c.opts.SeriesLimit {
			what = "over the limit"
		}
		return none, fmt.Errorf("query %s: %d series, %s (--prometheus-series-limit %d): the edges would be incomplete", q, len(v), what, c.opts.SeriesLimit)
	}
	// A warning is how Prometheus, Thanos and Mimir say an answer is partial (a store that did
	// not answer, a limit hit on the way): its edges would be incomplete and look complete.
	// Infos ("metric might not be a counter") do not cut the answer and are not read.
	if len(warnings) > 0 {
		return none, fmt.Errorf("query %s: Prometheus answered with %d warning(s), a partial answer whose edges would be incomplete: %s", q, len(warnings), strings.Join(warnings, "; "))
	}
	if val == nil {
		return none, fmt.Errorf("query %s: the answer has no result (no data.resultType and data.result)", q)
	}
	v, ok := val.(model.Vector)
	if !ok {
		return none, fmt.Errorf("query %s: got a %s, want a vector", q, val.Type())
	}
	checked, err := checkVector(v)
	if err != nil {
		return none, fmt.Errorf("query %s: %w", q, err)
	}
	return checked, nil
}

// checkVector refuses an answer no aggregation of counters gives, by telemetry.CheckVector (the
// one check, for both readers' paths): an empty series, an increase that is not a count (NaN,
// an infinity, negative, over MaxIncrease), or a series twice whatever its values (a sum by its
// labels has each label set once; summing both would count its calls twice, and a twin here
// says the answer is not the aggregation asked for). The series is named with its labels
// quoted, so a value with quotes or newlines reads as written.
func checkVector(v model.Vector) (telemetry.Checked, error) {
	// client_golang's decoding leaves a sample's value 0 when the answer gives none (a sample
	// without "value": its time is 0 too; an instant query's samples are at its time, never 0)
	// or gives a native histogram instead: read as a count, either would be a silent 0 (an edge
	// not observed) where the answer holds no count at all.
	for _, s := range v {
		switch {
		case s == nil:
		case s.Histogram != nil:
			return telemetry.Checked{}, fmt.Errorf("series %s: a native histogram, not a counter's increase", s.Metric)
		case s.Timestamp == 0:
			return telemetry.Checked{}, fmt.Errorf(`series %s: no value (no "value" in the answer's series)`, s.Metric)
		}
	}
	checked, err := telemetry.CheckVector(v)
	var bad *telemetry.BadSeries
	switch {
	case errors.As(err, &bad) && bad.Twice:
		return checked, twice(bad.Sample, bad.Prev)
	case err != nil:
		return checked, err
	case len(checked.Twins()) > 0:
		s := checked.Twins()[0]
		return telemetry.Checked{}, twice(s, s.Value)
	}
	return checked, nil
}

func twice(s *model.Sample, prev model.SampleValue) error {
	return fmt.Errorf("series %s: in the answer twice, with values %s and %s (an aggregation gives each label set once)", s.Metric,
		strconv.FormatFloat(float64(prev), 'g', -1, 64), strconv.FormatFloat(float64(s.Value), 'g', -1, 64))
}

// checkRedirect follows a redirect on the same host (a path prefix added, a login page: the
// answer is then checked as any), and refuses one of the API that makes the query's POST a GET
// without the query (301, 302, 303; 307 and 308 keep it), one to another host, or from https to http: the
// credentials and the query are for --prometheus-url's host (prometheus/common drops the
// credentials on the way, and the other host's 401 would blame them), and a server nobody
// configured would be taken for Prometheus.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return fmt.Errorf("redirected %d times, the last to %s: not followed further", len(via), redacted(req.URL))
	}
	prev := via[len(via)-1]
	code := 0
	if req.Response != nil {
		code = req.Response.StatusCode
	}
	sameHost := req.URL.Hostname() == prev.URL.Hostname() && (prev.URL.Scheme != "https" || req.URL.Scheme != "http")
	if b, ok := strings.CutSuffix(req.URL.Path, "/api/v1/query"); ok && sameHost && prev.Method == http.MethodPost && req.Method != http.MethodPost {
		// A 301, 302 or 303 of the API (a moved path prefix, http to https) turns the query's
		// POST into a GET without its form: Prometheus then answered "bad_data: ... no
		// expression found in input", which blames the query. (A redirect elsewhere, a login
		// page, is followed: its answer is named as what it is.)
		u := *req.URL
		u.Path, u.RawPath, u.RawQuery, u.Fragment = b, "", "", ""
		return fmt.Errorf("HTTP %d from %s: the POST of the query was redirected to %s, which HTTP follows with a GET without the query: not followed (give that URL's base, %s, as --prometheus-url)",
			code, redacted(prev.URL), redacted(req.URL), redacted(&u))
	}
	if sameHost {
		return nil
	}
	what := "another host"
	if req.URL.Hostname() == prev.URL.Hostname() {
		what = "plain http from https"
	}
	return fmt.Errorf("HTTP %d from %s: redirected to %s, %s: not followed (the credentials and the query are for --prometheus-url's host; give that URL as --prometheus-url if it is Prometheus)",
		code, redacted(prev.URL), redacted(req.URL), what)
}

// statusClient refuses a 2xx answer whose "status" is neither "success" nor "error" (a
// Prometheus answer always has one of them first): client_golang reads any other, or none, as
// a success, so a proxy's or a look-alike's JSON with a "data" would be taken as an answer.
type statusClient struct{ api.Client }

func (c statusClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	resp, body, err := c.Client.Do(ctx, req)
	if err != nil || resp.StatusCode/100 != 2 {
		return resp, body, err
	}
	h, ok := answerHead(body)
	switch {
	case !ok:
	case h.Status != "success" && h.Status != "error":
		return resp, body, fmt.Errorf(`the answer's "status" is %q, want "success" or "error" (not Prometheus' query API?)`, h.Status)
	case h.IsPartial:
		return resp, body, errors.New(`the answer says "isPartial": true, a partial answer whose edges would be incomplete (a querier missing some of its stores)`)
	}
	return resp, body, nil
}

// head is what answerHead reads of an answer: its "status" ("" when it has none) and
// "isPartial", the flag some queriers in front of several stores set on an answer missing some
// of them (client_golang does not read it).
type head struct {
	Status    string `json:"status"`
	IsPartial bool   `json:"isPartial"`
}

// answerHead reads a JSON object's head; ok false when body is not a JSON object
// (client_golang says what it is). Prometheus writes "status" first and a querier that adds
// "isPartial" writes it next: read as tokens, without scanning the rest; an object that does
// not start so is decoded whole for them.
func answerHead(body []byte) (head, bool) {
	var h head
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return h, false
	}
	if k, err := dec.Token(); err == nil && k == "status" {
		if dec.Decode(&h.Status) != nil {
			return h, false
		}
		if k, err := dec.Token(); err == nil && k == "isPartial" {
			_ = dec.Decode(&h.IsPartial) // not a bool: client_golang reads the rest
		}
		return h, true
	}
	if json.Unmarshal(body, &h) != nil {
		return head{}, false
	}
	return h, true
}

// errAnswerTooLarge is the read error of an answer over Options.MaxAnswerBytes; status is the
// HTTP status of an error answer (not 2xx), 0 for a success's.
type errAnswerTooLarge struct {
	max    int64
	status int
}

func (e errAnswerTooLarge) Error() string {
	if e.status != 0 {
		return fmt.Sprintf("HTTP %d %s: the error answer is over %d bytes, the bound on one answer (%s %s): refused, not read further (a proxy in front of Prometheus?)",
			e.status, http.StatusText(e.status), e.max, MaxAnswerSizeFlag, FormatSize(e.max))
	}
	return fmt.Sprintf("the answer is over %d bytes, the bound on one answer (%s %s): refused, not read further (raise %s if the cluster's answers are this large)",
		e.max, MaxAnswerSizeFlag, FormatSize(e.max), MaxAnswerSizeFlag)
}

// checkedTransport bounds a successful answer's body and refuses one that is not JSON: a login
// page or a proxy's HTML answering 200 (often after a redirect) is named as such, with the URL
// that served it and its first bytes, rather than as a JSON syntax error.
type checkedTransport struct {
	next http.RoundTripper
	max  int64
}

func (t *checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode/100 != 2 {
		// An error answer is read whole by client_golang too (for its message): one that does
		// not end (a proxy streaming something else) is bounded like a success's.
		resp.Body = &boundedBody{rc: resp.Body, left: t.max, max: t.max, status: resp.StatusCode}
		return resp, nil
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d from %s: Content-Length %d: %w", resp.StatusCode, redacted(req.URL), resp.ContentLength, errAnswerTooLarge{max: t.max})
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		head := make([]byte, 120)
		n, _ := io.ReadFull(resp.Body, head)
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d from %s with Content-Type %q, not Prometheus' JSON (a login page or a proxy in front of Prometheus?): the answer begins %q",
			resp.StatusCode, redacted(req.URL), resp.Header.Get("Content-Type"), head[:n])
	}
	resp.Body = &boundedBody{rc: resp.Body, left: t.max, max: t.max, pairs: &pairScanner{}}
	return resp, nil
}

// boundedBody fails a read past max bytes.
type boundedBody struct {
	rc        io.ReadCloser
	left, max int64
	status    int          // an error answer's HTTP status, 0 for a success's
	pairs     *pairScanner // a success answer's sample pairs, checked as read (pairs.go)
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an answer of exactly max bytes from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errAnswerTooLarge{b.max, b.status}
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.pairs != nil {
		b.pairs.feed(p[:n])
		if b.pairs.bad != nil {
			return 0, b.pairs.bad
		}
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// describe says what an HTTP status in client_golang's error means: its message is only
// "client error: 401", which does not say that the server asked for credentials. A refusal
// names the flags that would fix it; the callers name the URL ("Prometheus at URL: ...").
//
// A 404 is a URL that serves no Prometheus API at endpoint (where the query went): one without
// the path prefix Prometheus is served under, or with the API's own path pasted in.
//
// An error answer client_golang does not decode (it does for 400 and 422 only) that is
// Prometheus' own JSON error (a 503 "timeout" when the evaluation took longer than its
// --query.timeout or the query's timeout) is said by its errorType and error.
func describe(err error, endpoint string, timeout time.Duration) error {
	var ae *v1.Error
	if !errors.As(err, &ae) {
		return err
	}
	if ae.Type == "" && ae.Msg == "" {
		return errors.New(`the answer says "status": "error" without an errorType or an error message`)
	}
	code, ok := strings.CutPrefix(ae.Msg, "client error: ")
	if !ok {
		code, ok = strings.CutPrefix(ae.Msg, "server error: ")
	}
	n, cerr := strconv.Atoi(code)
	if !ok || cerr != nil {
		return err
	}
	switch n {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("HTTP %d %s: Prometheus refused the query: its credentials are missing or wrong (--prometheus-bearer-token-file, or --prometheus-username and --prometheus-password-file): %w", n, http.StatusText(n), err)
	}
	prefix := fmt.Sprintf("HTTP %d %s", n, http.StatusText(n))
	var pe struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if json.Unmarshal([]byte(ae.Detail), &pe) == nil && pe.Status == "error" && pe.ErrorType != "" {
		msg := fmt.Sprintf("%s: Prometheus gave up on the query: %s: %s", prefix, pe.ErrorType, pe.Error)
		if pe.ErrorType == string(v1.ErrTimeout) {
			msg += fmt.Sprintf(" (its --query.timeout, or --prometheus-timeout %v if shorter, bounds the evaluation)", timeout)
		}
		return errors.New(msg)
	}
	if n == http.StatusNotFound {
		prefix += fmt.Sprintf(": no Prometheus API at %s: give Prometheus' base URL as --prometheus-url, with the path prefix it is served under if any (--web.route-prefix, an ingress path: http://host/prometheus)", endpoint)
	}
	// The body says who answered and why (a proxy's "no healthy upstream", a querier's "too many
	// outstanding requests"): its first bytes, quoted.
	if d := strings.TrimSpace(ae.Detail); d != "" {
		if len(d) > 120 {
			d = d[:120]
		}
		return fmt.Errorf("%s: %w: the answer begins %q", prefix, err, d)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// unwrapURLError keeps the message short and stable: net/http's *url.Error repeats the method
// and the whole query URL, which the message has already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Join pairs the vectors into series: retrycap-proxy's attempts with its calls per
// (namespace, caller, upstream); Envoy's totals with its retries per (namespace, caller,
// cluster), its calls being its totals minus its retries; Linkerd's route requests with its
// retries per (namespace, caller, parent Service), its attempts being the requests plus the
// retries. A sample without a caller (or retrycap's without an upstream) is kept with the name
// empty, for observed.Compute to count as not placed (the condition says so); an Envoy cluster
// that is not an outbound service and a Linkerd parent without a name are not graph edges and
// are dropped. A Linkerd sample with exported_namespace (a federation without honor_labels: its
// namespace is the scrape target's) is kept in the namespace it claims with ExportedNamespace
// set, for observed.Compute to count as not placed, never as an edge of either namespace.
func Join(v Vectors, caller string) []observed.Series {
	type key struct{ ns, caller, upstream, renamed string }
	label := func(m model.Metric, name string) string { return string(m[model.LabelName(name)]) }
	// pair sums two vectors per key, in the order the keys first appear; up maps a sample to
	// its upstream (ok false: not a graph edge).
	pair := func(first, second model.Vector, up func(m model.Metric, ns string) (string, bool)) ([]key, map[key]*[2]float64) {
		var order []key
		sums := map[key]*[2]float64{}
		for i, vec := range []model.Vector{first, second} {
			for _, smp := range vec {
				ns, renamed := label(smp.Metric, "namespace"), ""
				if x := label(smp.Metric, telemetry.LinkerdExportedNamespace); x != "" {
					ns, renamed = x, ns
				}
				u, ok := up(smp.Metric, ns)
				k := key{ns, label(smp.Metric, caller), u, renamed}
				if !ok {
					continue
				}
				if sums[k] == nil {
					sums[k] = &[2]float64{}
					order = append(order, k)
				}
				sums[k][i] += float64(smp.Value)
			}
		}
		return order, sums
	}
	var out []observed.Series
	add := func(src string, order []key, sums map[key]*[2]float64, counts func(a, b float64) (attempts, calls float64)) {
		for _, k := range order {
			a, c := counts(sums[k][0], sums[k][1])
			out = append(out, observed.Series{Source: src, Namespace: k.ns, Caller: k.caller, Upstream: k.upstream, Attempts: a, Calls: c, TargetNamespace: k.renamed})
		}
	}
	order, sums := pair(v.Attempts, v.Calls, func(m model.Metric, _ string) (string, bool) { return label(m, "upstream"), true })
	add(observed.SourceRetrycap, order, sums, func(attempts, calls float64) (float64, float64) { return attempts, calls })
	order, sums = pair(v.EnvoyTotal, v.EnvoyRetry, func(m model.Metric, ns string) (string, bool) {
		return EnvoyUpstream(label(m, "envoy_cluster_name"), ns)
	})
	add(observed.SourceEnvoy, order, sums, func(total, retry float64) (float64, float64) { return total, total - retry })
	order, sums = pair(v.LinkerdRequests, v.LinkerdRetries, func(m model.Metric, ns string) (string, bool) {
		return LinkerdUpstream(label(m, "parent_name"), label(m, "parent_namespace"), ns)
	})
	add(observed.SourceLinkerd, order, sums, func(requests, retries float64) (float64, float64) { return requests + retries, requests })
	return out
}

// LinkerdUpstream names a Linkerd route's parent Service as a caller in namespace ns names it:
// "payment" from its own namespace, "payment.billing" from another (and when the scrape gives
// the caller no namespace). A parent without a name or namespace is not a Service of the graph.
func LinkerdUpstream(name, parentNS, ns string) (string, bool) {
	if name == "" || parentNS == "" {
		return "", false
	}
	if parentNS == ns {
		return name, true
	}
	return name + "." + parentNS, true
}

// EnvoyUpstream maps an Istio outbound cluster name, "outbound|PORT|SUBSET|HOST", to the
// upstream's name as a caller in namespace ns names it: HOST "payment.shop.svc.cluster.local"
// is "payment" from shop and "payment.shop" from elsewhere. The cluster domain after ".svc" is
// any (a cluster installed with another --cluster-domain, "payment.shop.svc.corp.example", was
// read as no service: its every edge dropped without a word): Istio names a Kubernetes
// Service's cluster NAME.NAMESPACE.svc.DOMAIN, and a host whose third label is "svc" is taken
// for one. Other clusters (inbound, the passthrough and black-hole clusters, a host outside
// the cluster) are not services of the graph: ok false.
func EnvoyUpstream(cluster, ns string) (string, bool) {
	parts := strings.Split(cluster, "|")
	if len(parts) != 4 || parts[0] != "outbound" {
		return "", false
	}
	labels := strings.Split(parts[3], ".")
	if len(labels) < 3 || labels[2] != "svc" || labels[0] == "" || labels[1] == "" || slices.Contains(labels[3:], "") {
		return "", false
	}
	if labels[1] == ns {
		return labels[0], true
	}
	return labels[0] + "." + labels[1], true
}
