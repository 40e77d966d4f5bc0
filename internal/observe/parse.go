package observe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// RetrycapLogMarker is the value of the "log" field that marks a retrycap-proxy access-log line
// among the proxy's other output (stdout carries both).
const RetrycapLogMarker = "retrycap-access"

// Source says where a stream of lines came from.
type Source struct {
	// Name labels the stream in errors (a file, "stdin", namespace/pod/container).
	Name string
	// Service is the service whose sidecar wrote the stream, when known (--from-cluster: the
	// pod's app label): the caller of its Envoy outbound lines, which do not name it.
	Service string
}

// Stats counts what a parse read.
type Stats struct {
	Lines    int `json:"lines"`    // lines read
	Attempts int `json:"attempts"` // lines that were attempts
	Skipped  int `json:"skipped"`  // other lines (the proxy's own log, blank, unknown)
	Bad      int `json:"bad"`      // lines that looked like access-log lines but did not parse
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Lines += o.Lines
	s.Attempts += o.Attempts
	s.Skipped += o.Skipped
	s.Bad += o.Bad
}

// Parse reads access-log lines of any of the formats from r, calling emit for each attempt. A
// line of no known format is skipped (counted); a line that starts like one but does not parse
// is counted as bad. Errors are the reader's.
func Parse(r io.Reader, src Source, emit func(Attempt)) (Stats, error) {
	var st Stats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		st.Lines++
		line := bytes.TrimSpace(sc.Bytes())
		a, ok, err := ParseLine(line, src)
		switch {
		case err != nil:
			st.Bad++
		case !ok:
			st.Skipped++
		default:
			st.Attempts++
			emit(a)
		}
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("%s: %w", src.Name, err)
	}
	return st, nil
}

// ParseLine parses one line: ok false (and no error) for a line of no known format.
func ParseLine(line []byte, src Source) (a Attempt, ok bool, err error) {
	if len(line) == 0 {
		return a, false, nil
	}
	switch line[0] {
	case '{':
		if bytes.Contains(line, []byte(`"`+RetrycapLogMarker+`"`)) {
			return parseRetrycap(line)
		}
		if bytes.Contains(line, []byte(`"start_time"`)) && bytes.Contains(line, []byte(`"response_code"`)) {
			return parseEnvoyJSON(line, src)
		}
	case '[':
		return parseEnvoyText(line, src)
	}
	return a, false, nil
}

// retrycapLine is retrycap-proxy's access-log record (internal/proxy/accesslog writes it).
type retrycapLine struct {
	Log        string `json:"log"`
	Time       string `json:"time"`
	Service    string `json:"service"`
	Upstream   string `json:"upstream"`
	Method     string `json:"method"`
	Authority  string `json:"authority"`
	Path       string `json:"path"`
	Attempt    int    `json:"attempt"`
	BudgetIn   *int   `json:"budget_in"`
	BudgetOut  *int   `json:"budget_out"`
	Status     int    `json:"status"`
	GRPCStatus *int   `json:"grpc_status"`
	DurationUS int64  `json:"duration_us"`
	Exhausted  string `json:"exhausted"`
	Error      string `json:"error"`
	TraceID    string `json:"trace_id"`
	IdemKey    string `json:"idempotency_key"`
	RequestID  string `json:"request_id"`
	StormOp    string `json:"storm_op"`
}

func parseRetrycap(line []byte) (Attempt, bool, error) {
	var l retrycapLine
	if err := json.Unmarshal(line, &l); err != nil {
		return Attempt{}, false, err
	}
	if l.Log != RetrycapLogMarker {
		return Attempt{}, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, l.Time)
	if err != nil {
		return Attempt{}, false, fmt.Errorf("time: %w", err)
	}
	target := l.Upstream
	if target == "" || target == "unknown" {
		target = ServiceOfHost(l.Authority)
	}
	a := Attempt{
		Format: FormatRetrycap, Direction: Outbound, Time: t.UTC(),
		Caller: l.Service, Target: target, Method: l.Method, Authority: l.Authority, Path: stripQuery(l.Path),
		Number: l.Attempt, BudgetIn: intOr(l.BudgetIn, -1), BudgetOut: intOr(l.BudgetOut, -1),
		Status: l.Status, GRPCStatus: intOr(l.GRPCStatus, -1), Duration: time.Duration(l.DurationUS) * time.Microsecond,
		Exhausted: l.Exhausted, Error: l.Error, TraceID: l.TraceID, IdemKey: l.IdemKey, RequestID: l.RequestID, StormOp: l.StormOp,
	}
	return a, true, nil
}

func intOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

// Envoy's and Istio's default text formats, field by field (Istio's since 1.9):
//
//	[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE%
//	%RESPONSE_FLAGS% [Istio: %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%
//	"%UPSTREAM_TRANSPORT_FAILURE_REASON%"] %BYTES_RECEIVED% %BYTES_SENT% %DURATION%
//	%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%"
//	"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" [Istio: %UPSTREAM_CLUSTER_RAW%
//	%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS%
//	%REQUESTED_SERVER_NAME% %ROUTE_NAME%]
const (
	envoyFields = 13
	istioFields = 22
)

func parseEnvoyText(line []byte, src Source) (Attempt, bool, error) {
	f := tokens(string(line))
	var code, flags, dur, rid, authority, cluster, reqLine, start string
	switch {
	case len(f) >= istioFields:
		start, reqLine, code, flags, dur, rid, authority, cluster = f[0], f[1], f[2], f[3], f[9], f[13], f[14], f[16]
	case len(f) >= envoyFields:
		start, reqLine, code, flags, dur, rid, authority = f[0], f[1], f[2], f[3], f[6], f[10], f[11]
	default:
		return Attempt{}, false, fmt.Errorf("envoy text line: %d fields, want %d (Envoy) or %d (Istio)", len(f), envoyFields, istioFields)
	}
	e := envoyRecord{start: start, code: code, flags: flags, dur: dur, rid: rid, authority: authority, cluster: cluster}
	e.method, e.path, _ = strings.Cut(reqLine, " ")
	e.path, _, _ = strings.Cut(e.path, " ")
	return e.attempt(FormatEnvoyText, src)
}

// istioJSON is Istio's default JSON encoding (meshConfig.accessLogEncoding: JSON), the fields
// observe reads.
type istioJSON struct {
	StartTime       string          `json:"start_time"`
	Method          string          `json:"method"`
	Path            string          `json:"path"`
	ResponseCode    json.RawMessage `json:"response_code"`
	ResponseFlags   string          `json:"response_flags"`
	Duration        json.RawMessage `json:"duration"`
	RequestID       string          `json:"request_id"`
	Authority       string          `json:"authority"`
	UpstreamCluster string          `json:"upstream_cluster"`
	Traceparent     string          `json:"traceparent"`
}

func parseEnvoyJSON(line []byte, src Source) (Attempt, bool, error) {
	var j istioJSON
	if err := json.Unmarshal(line, &j); err != nil {
		return Attempt{}, false, err
	}
	e := envoyRecord{
		start: j.StartTime, method: j.Method, path: j.Path, code: rawString(j.ResponseCode), flags: j.ResponseFlags,
		dur: rawString(j.Duration), rid: j.RequestID, authority: j.Authority, cluster: j.UpstreamCluster,
	}
	a, ok, err := e.attempt(FormatEnvoyJSON, src)
	a.TraceID = TraceIDOf(j.Traceparent)
	return a, ok, err
}

func rawString(r json.RawMessage) string {
	s := strings.TrimSpace(string(r))
	if uq, err := strconv.Unquote(s); err == nil {
		return uq
	}
	return s
}

type envoyRecord struct {
	start, method, path, code, flags, dur, rid, authority, cluster string
}

func (e envoyRecord) attempt(format Format, src Source) (Attempt, bool, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.Trim(e.start, "[]"))
	if err != nil {
		return Attempt{}, false, fmt.Errorf("start time: %w", err)
	}
	a := Attempt{
		Format: format, Time: t.UTC(), Method: dash(e.method), Authority: dash(e.authority), Path: stripQuery(dash(e.path)),
		BudgetIn: -1, BudgetOut: -1, GRPCStatus: -1, RequestID: dash(e.rid),
	}
	if a.Status, err = strconv.Atoi(e.code); err != nil {
		return Attempt{}, false, fmt.Errorf("response code %q: %w", e.code, err)
	}
	if ms, err := strconv.ParseInt(e.dur, 10, 64); err == nil {
		a.Duration = time.Duration(ms) * time.Millisecond
	}
	if fl := dash(e.flags); fl != "" {
		a.Exhausted = fl
	}
	// outbound|8080||payment.shop.svc.cluster.local, inbound|8080||
	dir, rest, _ := strings.Cut(dash(e.cluster), "|")
	switch dir {
	case "inbound":
		a.Direction = Inbound
		a.Target = ServiceOfHost(a.Authority)
	default:
		a.Direction = Outbound
		a.Caller = src.Service
		parts := strings.Split(rest, "|")
		if len(parts) == 3 && parts[2] != "" {
			a.Target = ServiceOfHost(parts[2])
		} else {
			a.Target = ServiceOfHost(a.Authority)
		}
	}
	return a, true, nil
}

func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// tokens splits an Envoy text line: [bracketed] and "quoted" fields are one field each (the
// brackets kept, the quotes removed), the rest split on spaces.
func tokens(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		switch s[i] {
		case ' ', '\t':
			i++
		case '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				out = append(out, s[i+1:])
				return out
			}
			out = append(out, s[i+1:i+1+j])
			i += j + 2
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				j = len(s) - i - 1
			}
			out = append(out, s[i:i+j+1])
			i += j + 1
		default:
			j := strings.IndexAny(s[i:], " \t")
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, s[i:i+j])
			i += j
		}
	}
	return out
}
