package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
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
	// pod's app label): the caller of its Envoy outbound lines, which do not name it, and the
	// callee of its inbound lines when they carry no SNI.
	Service string
}

// Stats counts what a parse read. Lines = Attempts - ListedRetries + Skipped + Unread + Bad +
// TooLong.
type Stats struct {
	Lines int `json:"lines"` // lines read
	// Attempts are the attempts read: one per line, except an ingress-nginx line (one client
	// request), one per upstream try it lists.
	Attempts int `json:"attempts"`
	// ListedRetries are those of the Attempts a line lists after its first (ingress-nginx's
	// upstream tries after a request's first): Attempts - ListedRetries lines were attempts.
	ListedRetries int `json:"listed_retries,omitempty"`
	Skipped       int `json:"skipped"` // other lines (the proxy's own log, Envoy's startup lines, blank, unknown)
	// Unread are access-log lines observe recognises and cannot read as an HTTP attempt (an
	// Envoy or Istio TCP connection, nginx's combined format, HAProxy's HTTP log, a JSON access
	// log of another shape, a Docker json-file line); FirstUnread says where the first is and
	// why, as FirstBad does.
	Unread      int    `json:"unread,omitempty"`
	FirstUnread string `json:"first_unread,omitempty"`
	Bad         int    `json:"bad"`      // lines that looked like access-log lines but did not parse (a truncated line)
	TooLong     int    `json:"too_long"` // lines over the line limit, not parsed
	// FirstBad is where the first bad line is and why ("FILE: line N: field \"status\": ..."),
	// "" when none: a count alone does not say what to look at.
	FirstBad string `json:"first_bad,omitempty"`
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Lines += o.Lines
	s.Attempts += o.Attempts
	s.ListedRetries += o.ListedRetries
	s.Skipped += o.Skipped
	s.Unread += o.Unread
	s.Bad += o.Bad
	s.TooLong += o.TooLong
	if s.FirstBad == "" {
		s.FirstBad = o.FirstBad
	}
	if s.FirstUnread == "" {
		s.FirstUnread = o.FirstUnread
	}
}

// String is the stats line observe prints on stderr.
func (s Stats) String() string {
	unread := ""
	if s.Unread > 0 {
		unread = fmt.Sprintf(", %s not read (the first: %s)", Thousands(s.Unread), s.FirstUnread)
	}
	listed := ""
	if s.ListedRetries > 0 {
		listed = fmt.Sprintf(" (%s of them upstream tries after a request's first that its ingress-nginx line lists)", Thousands(s.ListedRetries))
	}
	out := fmt.Sprintf("%s lines read: %s attempts%s, %s skipped%s, %s bad, %s over the line limit",
		Thousands(s.Lines), Thousands(s.Attempts), listed, Thousands(s.Skipped), unread, Thousands(s.Bad), Thousands(s.TooLong))
	if s.FirstBad != "" {
		out += " (the first bad: " + s.FirstBad + ")"
	}
	return out
}

// rec is one parsed line: its values are sub-slices of the line (or of the scratch buffer the
// parse unescaped into), valid until the next line. It is what the hot path folds: no string
// and no allocation per line.
type rec struct {
	format              Format
	dir                 Direction
	start, dur          int64 // Unix ns, ns
	caller, target      []byte
	method, authority   []byte
	path                []byte
	number              int
	budgetIn, budgetOut int
	status, grpc        int
	exhausted, errText  []byte
	cut                 []byte // retrycap's "cut": who ended a streamed body short ("" when whole)
	bodyBytes           int64  // retrycap's "body_bytes" of a cut line
	traceID, idem       []byte
	rid, stormOp        []byte
}

func (r *rec) reset() {
	*r = rec{budgetIn: -1, budgetOut: -1, grpc: -1}
}

// key is the record's grouping key and its kind (see Attempt.Key).
func (r *rec) key() ([]byte, kindCode) {
	switch {
	case len(r.idem) > 0:
		return r.idem, kindIdem
	case len(r.traceID) > 0:
		return r.traceID, kindTrace
	case len(r.rid) > 0:
		return r.rid, kindRequest
	case len(r.stormOp) > 0:
		return r.stormOp, kindStorm
	}
	return nil, kindNone
}

func (r *rec) failed() bool {
	return failed(r.status, r.grpc, len(r.cut) > 0)
}

// failed is Attempt.Failed's rule: a cut answer is a failure whatever its status.
func failed(status, grpc int, cut bool) bool {
	if cut || status == 0 || status >= 500 || status == 429 {
		return true
	}
	switch grpc {
	case -1, 0, 3, 5, 6, 7, 9, 11, 16:
		return false
	}
	return true
}

// attempt materialises the record (strings copied).
func (r *rec) attempt() Attempt {
	return Attempt{
		Format: r.format, Direction: r.dir, Time: time.Unix(0, r.start).UTC(),
		Caller: string(r.caller), Target: string(r.target), Method: string(r.method), Authority: string(r.authority),
		Path: string(r.path), Number: r.number, BudgetIn: r.budgetIn, BudgetOut: r.budgetOut,
		Status: r.status, GRPCStatus: r.grpc, Duration: time.Duration(r.dur), Exhausted: string(r.exhausted),
		Error: string(r.errText), Cut: string(r.cut), BodyBytes: r.bodyBytes, TraceID: string(r.traceID), IdemKey: string(r.idem),
		RequestID: string(r.rid), StormOp: string(r.stormOp),
	}
}

// parser holds the per-stream scratch the line parsers reuse.
type parser struct {
	src     Source
	scratch []byte
	toks    [envoyMaxTokens]tok
	r       rec
	ng      nginxLine // the tries of an ingress-nginx line (r is its first)
	unread  string    // why the last lineUnread was not read
}

type lineKind uint8

const (
	lineSkipped lineKind = iota
	lineBad
	lineAttempt
	// lineUnread: an access-log line of a shape observe recognises and cannot read as an HTTP
	// attempt; parser.unread says which and why.
	lineUnread
)

// Bounds on what an attempt keeps, so that memory grows with the distinct keys and names of
// the input, never with the length of its lines (a line may be up to --max-line).
const (
	// MaxKeyBytes is the longest key (Idempotency-Key, request id, storm-op) read: 256 bytes,
	// beyond any key a client generates (a UUID is 36; the proxy's own log cuts keys at 96).
	MaxKeyBytes = 256
	// MaxNameBytes is the longest service name and host read: 253, a DNS name's longest.
	MaxNameBytes = 253
	// MaxMethodBytes is the longest method read.
	MaxMethodBytes = 32
	// maxDuration is the longest attempt read (10 years): with the times' years bounded to
	// 1970-2200 every start + duration and every span fits Unix nanoseconds.
	maxDuration = 10 * 365 * 24 * int64(time.Hour)
)

// parse reads one line (already without its CRI / kubectl prefixes) into p.r, and refuses an
// attempt whose key, names or duration are over the bounds above (bad, naming the field).
func (p *parser) parse(line []byte) (lineKind, error) {
	k, err := p.parseLine(line)
	if k != lineAttempt {
		return k, err
	}
	r := &p.r
	for _, f := range [...]struct {
		name string
		v    []byte
		max  int
	}{
		{"idempotency key", r.idem, MaxKeyBytes}, {"request id", r.rid, MaxKeyBytes}, {"storm-op", r.stormOp, MaxKeyBytes},
		{"caller", r.caller, MaxNameBytes}, {"callee", r.target, MaxNameBytes}, {"method", r.method, MaxMethodBytes},
	} {
		if len(f.v) > f.max {
			return lineBad, fmt.Errorf("%s of %d bytes, over the bound of %d: %.40q (cut)", f.name, len(f.v), f.max, f.v)
		}
	}
	if r.dur > maxDuration || r.dur < 0 {
		return lineBad, fmt.Errorf("duration of %d ns: over 10 years", r.dur)
	}
	// A trace id is W3C's: 32 hex digits, not all zero. Any other is ignored, as W3C says of an
	// invalid traceparent (the proxy copies the header as the client sent it), and the attempt
	// is keyed by its request id: an all-zero id from many clients would otherwise merge
	// their requests into one key.
	if len(r.traceID) > 0 && !validTraceID(r.traceID) {
		r.traceID = nil
	}
	return lineAttempt, nil
}

func validTraceID(id []byte) bool {
	if len(id) != 32 {
		return false
	}
	zero := true
	for _, c := range id {
		switch {
		case c == '0':
		case (c >= '1' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'):
			zero = false
		default:
			return false
		}
	}
	return !zero
}

// envoyJSONKeys says whether a JSON line that does not parse has a key only Envoy's access
// log has. Istio's JSON is written with its keys in order, start_time late: a line cut before
// it had neither start_time nor response_code, and was skipped as an application's, or read
// as "a JSON access log of another shape" (cut after "response_code").
func envoyJSONKeys(line []byte) bool {
	for _, k := range [...]string{`"bytes_received"`, `"response_code"`, `"response_flags"`, `"upstream_cluster"`, `"upstream_host"`, `"requested_server_name"`, `"downstream_remote_address"`, `"x-request-id"`} {
		if bytes.Contains(line, []byte(k)) {
			return true
		}
	}
	return false
}

// parseLine reads one line into p.r.
func (p *parser) parseLine(line []byte) (lineKind, error) {
	p.scratch = p.scratch[:0]
	p.r.reset()
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return lineSkipped, nil
	}
	switch line[0] {
	case '{':
		k, err := p.parseJSON(line)
		if k == lineSkipped {
			if why := unreadJSON(line); why != "" {
				p.unread = why
				return lineUnread, nil
			}
		}
		return k, err
	case '[':
		// Envoy's own log lines, "[2026-11-24 13:47:51.233][1][info] ...": a space, not a T,
		// between the date and the time.
		if len(line) > 12 && line[11] == ' ' && isDigit(line[1]) {
			return lineSkipped, nil
		}
		if len(line) < 2 || !isDigit(line[1]) {
			return lineSkipped, nil
		}
		if err := p.parseEnvoyText(line); err != nil {
			return lineBad, err
		}
		return p.tcpOrAttempt()
	}
	if k, ok, err := p.parseIngressNginx(line); ok {
		return k, err
	}
	if why := unreadText(line); why != "" {
		p.unread = why
		return lineUnread, nil
	}
	return lineSkipped, nil
}

// tcpOrAttempt tells an Envoy or Istio line of a TCP connection (no method, response code 0:
// the text format's "- - -" request, the JSON format's null method) from an HTTP attempt: a
// connection to a database is no request, and would otherwise count as a failed attempt.
func (p *parser) tcpOrAttempt() (lineKind, error) {
	if len(p.r.method) == 0 && p.r.status == 0 {
		p.unread = "an Envoy TCP connection line (no HTTP method, response code 0): a connection, not an HTTP attempt"
		return lineUnread, nil
	}
	return lineAttempt, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Parse reads access-log lines of any of the formats from r, calling emit for each attempt. A
// line of no known format is skipped (counted); a line that starts like one but does not parse
// is counted as bad; a line over DefaultMaxLine is counted and skipped. Errors are the
// reader's.
func Parse(r io.Reader, src Source, emit func(Attempt)) (Stats, error) {
	return ParseLimit(r, src, DefaultMaxLine, emit)
}

// ParseLimit is Parse with a line limit.
func ParseLimit(r io.Reader, src Source, maxLine int, emit func(Attempt)) (Stats, error) {
	p := &parser{src: src}
	return scanLines(r, src, maxLine, p, func(r *rec) bool { emit(r.attempt()); return true })
}

// ParseLine parses one line: ok false (and no error) for a line of no known format. Of an
// ingress-nginx line that lists several upstream tries it gives the first (Parse gives each).
func ParseLine(line []byte, src Source) (a Attempt, ok bool, err error) {
	p := &parser{src: src}
	k, err := p.parse(stripShapes(line, nil))
	switch k { // lineUnread: not an attempt, as a line of no known format
	case lineAttempt:
		return p.r.attempt(), true, nil
	case lineBad:
		return a, false, err
	}
	return a, false, nil
}

// --- retrycap's and Istio's JSON ---

func (p *parser) parseJSON(line []byte) (lineKind, error) {
	r := &p.r
	var (
		logMark, startTime, timeField, code, cluster, sni []byte
		durMS, durUS, svc, upstream, attempt              []byte
		bin, bout, grpc, tp, cut, bodyBytes               []byte
		haveCode, haveStart, haveCut, haveBody            bool
	)
	// Each field read is taken once, of the kind it has in the formats: a second occurrence
	// (which one counts is ambiguous: encoding/json takes the last, others the first), an
	// object or array, or a number where a string belongs makes the line bad, naming the field,
	// rather than read as absent or as either value. Numbers may be written as strings (Istio's
	// JSON format quotes some).
	var seen uint32
	var fieldErr error
	err := scanJSONObject(line, &p.scratch, func(k, v []byte, kind valKind) {
		if fieldErr != nil || (kind == valLiteral && string(v) == "null") {
			return
		}
		f, ok := jsonFieldOf(k)
		if !ok {
			return
		}
		switch {
		case seen&(1<<f.id) != 0:
			fieldErr = fmt.Errorf("field %q twice in the line (which one counts is ambiguous)", k)
			return
		case kind == valNested:
			fieldErr = fmt.Errorf("field %q: an object or array where a %s belongs", k, f.want())
			return
		case !f.num && kind == valLiteral:
			fieldErr = fmt.Errorf("field %q: %s where a string belongs", k, v)
			return
		case f.num && string(v) != "-":
			if _, ok := atoi(v); !ok {
				fieldErr = fmt.Errorf("field %q: %q is not a whole number >= 0", k, v)
				return
			}
		}
		seen |= 1 << f.id
		switch f.id {
		case jLog:
			logMark = v
		case jTime:
			timeField = v
		case jStartTime:
			startTime, haveStart = v, true
		case jService:
			svc = v
		case jUpstream:
			upstream = v
		case jMethod:
			r.method = v
		case jAuthority:
			r.authority = v
		case jPath:
			r.path = v
		case jAttempt:
			attempt = v
		case jBudgetIn:
			bin = v
		case jBudgetOut:
			bout = v
		case jStatus:
			code = v
		case jResponseCode:
			code, haveCode = v, true
		case jGRPCStatus:
			grpc = v
		case jDurationUS:
			durUS = v
		case jDuration:
			durMS = v
		case jExhausted, jResponseFlags:
			r.exhausted = v
		case jError:
			r.errText = v
		case jCut:
			cut, haveCut = v, true
		case jBodyBytes:
			bodyBytes, haveBody = v, true
		case jTraceID:
			r.traceID = v
		case jTraceparent:
			tp = v
		case jIdempotencyKey:
			r.idem = v
		case jRequestID:
			r.rid = v
		case jStormOp:
			r.stormOp = v
		case jUpstreamCluster:
			cluster = v
		case jRequestedServerName:
			sni = v
		}
	})
	if err == nil && fieldErr != nil {
		if bytes.Contains(line, []byte(`"`+RetrycapLogMarker+`"`)) || bytes.Contains(line, []byte(`"start_time"`)) {
			return lineBad, fieldErr
		}
		return lineSkipped, nil
	}
	if err != nil {
		if bytes.Contains(line, []byte(`"`+RetrycapLogMarker+`"`)) || bytes.Contains(line, []byte(`"start_time"`)) || envoyJSONKeys(line) {
			return lineBad, fmt.Errorf("%w (truncated?)", err)
		}
		return lineSkipped, nil
	}
	switch {
	case string(logMark) == RetrycapLogMarker:
		r.format, r.dir = FormatRetrycap, Outbound
		t, ok := parseTime(timeField)
		if !ok {
			return lineBad, fmt.Errorf("time %q: want an RFC 3339 time from 1970 to 2200", timeField)
		}
		r.start = t
		if n, ok := atoi(durUS); ok {
			if n > maxDuration/1000 {
				return lineBad, fmt.Errorf("duration_us %d: over 10 years", n)
			}
			r.dur = n * 1000
		}
		if n, ok := atoi(code); ok {
			r.status = int(n)
		} else if len(code) > 0 {
			return lineBad, fmt.Errorf("status %q", code)
		}
		if n, ok := atoi(attempt); ok {
			r.number = int(n)
		}
		if n, ok := atoi(bin); ok {
			r.budgetIn = int(n)
		}
		if n, ok := atoi(bout); ok {
			r.budgetOut = int(n)
		}
		if n, ok := atoi(grpc); ok {
			r.grpc = int(n)
		}
		if err := r.readCut(cut, haveCut, bodyBytes, haveBody); err != nil {
			return lineBad, err
		}
		r.caller = svc
		if len(upstream) > 0 && string(upstream) != "unknown" {
			r.target = upstream
		} else {
			r.target = p.serviceOfHost(r.authority)
		}
		r.path = stripQueryB(r.path)
		return lineAttempt, nil
	case haveStart && haveCode:
		r.format = FormatEnvoyJSON
		if err := p.envoyFields(startTime, code, durMS, cluster, sni); err != nil {
			return lineBad, err
		}
		if len(r.traceID) == 0 {
			r.traceID = traceIDOfB(tp)
		}
		return p.tcpOrAttempt()
	}
	return lineSkipped, nil
}

// The JSON fields the formats' lines are read by, and whether each is a number.
const (
	jLog = iota
	jTime
	jStartTime
	jService
	jUpstream
	jMethod
	jAuthority
	jPath
	jAttempt
	jBudgetIn
	jBudgetOut
	jStatus
	jResponseCode
	jGRPCStatus
	jDurationUS
	jDuration
	jExhausted
	jResponseFlags
	jError
	jCut
	jBodyBytes
	jTraceID
	jTraceparent
	jIdempotencyKey
	jRequestID
	jStormOp
	jUpstreamCluster
	jRequestedServerName
)

type jsonFieldDef struct {
	id  uint8
	num bool
}

func (f jsonFieldDef) want() string {
	if f.num {
		return "number"
	}
	return "string"
}

// jsonFieldOf is the field a key names (a switch, not a map: it runs for every member of
// every line).
func jsonFieldOf(k []byte) (jsonFieldDef, bool) {
	switch string(k) {
	case "log":
		return jsonFieldDef{jLog, false}, true
	case "time":
		return jsonFieldDef{jTime, false}, true
	case "start_time":
		return jsonFieldDef{jStartTime, false}, true
	case "service":
		return jsonFieldDef{jService, false}, true
	case "upstream":
		return jsonFieldDef{jUpstream, false}, true
	case "method":
		return jsonFieldDef{jMethod, false}, true
	case "authority", ":authority": // Istio's name, Envoy Gateway's default JSON format's
		return jsonFieldDef{jAuthority, false}, true
	case "path", "x-envoy-origin-path":
		return jsonFieldDef{jPath, false}, true
	case "attempt":
		return jsonFieldDef{jAttempt, true}, true
	case "budget_in":
		return jsonFieldDef{jBudgetIn, true}, true
	case "budget_out":
		return jsonFieldDef{jBudgetOut, true}, true
	case "status":
		return jsonFieldDef{jStatus, true}, true
	case "response_code":
		return jsonFieldDef{jResponseCode, true}, true
	case "grpc_status":
		return jsonFieldDef{jGRPCStatus, true}, true
	case "duration_us":
		return jsonFieldDef{jDurationUS, true}, true
	case "duration":
		return jsonFieldDef{jDuration, true}, true
	case "exhausted":
		return jsonFieldDef{jExhausted, false}, true
	case "response_flags":
		return jsonFieldDef{jResponseFlags, false}, true
	case "error":
		return jsonFieldDef{jError, false}, true
	case "cut":
		return jsonFieldDef{jCut, false}, true
	case "body_bytes":
		return jsonFieldDef{jBodyBytes, true}, true
	case "trace_id":
		return jsonFieldDef{jTraceID, false}, true
	case "traceparent":
		return jsonFieldDef{jTraceparent, false}, true
	case "idempotency_key":
		return jsonFieldDef{jIdempotencyKey, false}, true
	case "request_id", "x-request-id": // Istio's name, Envoy Gateway's
		return jsonFieldDef{jRequestID, false}, true
	case "storm_op":
		return jsonFieldDef{jStormOp, false}, true
	case "upstream_cluster":
		return jsonFieldDef{jUpstreamCluster, false}, true
	case "requested_server_name":
		return jsonFieldDef{jRequestedServerName, false}, true
	}
	return jsonFieldDef{}, false
}

// readCut checks a retrycap line's "cut" and "body_bytes" (the proxy writes both, on the line
// of an answer whose streamed body ended short, and neither otherwise): a cut by a side the
// proxy does not name, a body_bytes that is no whole number, or either without the other
// makes the line bad, naming the field and the value. Read as a cut, the line is a failed
// attempt (Attempt.Failed), whatever its status.
func (r *rec) readCut(cut []byte, haveCut bool, bodyBytes []byte, haveBody bool) error {
	if !haveCut {
		if haveBody {
			return fmt.Errorf("field \"body_bytes\" %q without \"cut\" (the proxy writes both, on a cut answer's line)", bodyBytes)
		}
		return nil
	}
	switch string(cut) {
	case CutUpstream, CutClient, CutProxy:
	default:
		return fmt.Errorf("field \"cut\": %.40q is not %s, %s or %s", cut, CutUpstream, CutClient, CutProxy)
	}
	if !haveBody {
		return fmt.Errorf("field \"cut\" %q without \"body_bytes\" (the proxy writes both, on a cut answer's line)", cut)
	}
	n, ok := atoi(bodyBytes)
	if !ok {
		return fmt.Errorf("field \"body_bytes\": %q is not a whole number >= 0", bodyBytes)
	}
	r.cut, r.bodyBytes = cut, n
	return nil
}

// --- Envoy's and Istio's text formats ---

// Envoy's default format (13 fields) and Istio's default text format (22 fields; the
// EnvoyTextLogFormat of istio/istio pilot/pkg/model/telemetry_logging.go, Istio 1.9 on):
//
//	[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE%
//	%RESPONSE_FLAGS% [Istio: %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%
//	"%UPSTREAM_TRANSPORT_FAILURE_REASON%"] %BYTES_RECEIVED% %BYTES_SENT% %DURATION%
//	%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%"
//	"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" [Istio: %UPSTREAM_CLUSTER_RAW%
//	%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS%
//	%REQUESTED_SERVER_NAME% %ROUTE_NAME%]
//
// A line is one of them only with exactly that many fields, quoted exactly where the format
// quotes: a truncated Istio line is never read as a shorter Envoy one.
const (
	envoyFields    = 13
	istioFields    = 22
	envoyMaxTokens = istioFields + 1
)

// quoted fields of each format (bit i: field i is "quoted").
var (
	envoyQuoted = bits(1, 8, 9, 10, 11, 12)
	istioQuoted = bits(1, 6, 11, 12, 13, 14, 15)
)

func bits(is ...int) uint32 {
	var b uint32
	for _, i := range is {
		b |= 1 << i
	}
	return b
}

type tok struct {
	b      []byte
	quoted bool
}

var errTruncated = errors.New("unterminated field (truncated line?)")

// tokenize splits an Envoy text line into p.toks: [bracketed] (brackets dropped) and "quoted"
// fields are one field each, the rest split on blanks. More than envoyMaxTokens is reported as
// that many.
func (p *parser) tokenize(s []byte) (int, uint32, uint32, error) {
	n := 0
	var quoted, bracketed uint32
	for i := 0; i < len(s); {
		c := s[i]
		if c == ' ' || c == '\t' {
			i++
			continue
		}
		if n == envoyMaxTokens {
			return n, quoted, bracketed, nil
		}
		switch c {
		case '"':
			j := bytes.IndexByte(s[i+1:], '"')
			if j < 0 {
				return n, quoted, bracketed, errTruncated
			}
			p.toks[n] = tok{s[i+1 : i+1+j], true}
			quoted |= 1 << n
			i += j + 2
		case '[':
			j := bytes.IndexByte(s[i:], ']')
			if j < 0 {
				return n, quoted, bracketed, errTruncated
			}
			p.toks[n] = tok{s[i+1 : i+j], false}
			bracketed |= 1 << n
			i += j + 1
		default:
			j := i
			for j < len(s) && s[j] != ' ' && s[j] != '\t' {
				j++
			}
			p.toks[n] = tok{s[i:j], false}
			i = j
		}
		n++
	}
	return n, quoted, bracketed, nil
}

func (p *parser) parseEnvoyText(line []byte) error {
	n, quoted, bracketed, err := p.tokenize(line)
	if err != nil {
		return err
	}
	if bracketed != 1 {
		return fmt.Errorf("envoy text line: a [bracketed] field other than the start time")
	}
	f := p.toks[:n]
	r := &p.r
	r.format = FormatEnvoyText
	var start, reqLine, code, dur, cluster, sni []byte
	switch {
	case n == istioFields && quoted == istioQuoted:
		start, reqLine, code, r.exhausted, dur, r.rid, r.authority, cluster, sni =
			f[0].b, f[1].b, f[2].b, f[3].b, f[9].b, f[13].b, f[14].b, f[16].b, f[20].b
		if !numOrDash(f[7].b) || !numOrDash(f[8].b) {
			return fmt.Errorf("istio text line: bytes fields %q %q are not numbers", f[7].b, f[8].b)
		}
	case n == envoyFields && quoted == envoyQuoted:
		start, reqLine, code, r.exhausted, dur, r.rid, r.authority =
			f[0].b, f[1].b, f[2].b, f[3].b, f[6].b, f[10].b, f[11].b
		if !numOrDash(f[4].b) || !numOrDash(f[5].b) {
			return fmt.Errorf("envoy text line: bytes fields %q %q are not numbers", f[4].b, f[5].b)
		}
	case n == envoyFields || n == istioFields:
		// The count of one format, its quotes elsewhere: a header value with a quote in it
		// (Envoy writes header values unescaped, envoyproxy/envoy#4191) split its field, and
		// the line reached the other format's count by chance; read by count, its fields
		// would be another's.
		return fmt.Errorf("envoy text line: %d fields, but not quoted where Envoy's default format or Istio's quotes them (a header value with a \" in it? Envoy writes it unescaped)", n)
	default:
		return fmt.Errorf("envoy text line: %d fields, want exactly %d (Envoy's default format) or %d (Istio's)", n, envoyFields, istioFields)
	}
	if !numOrDash(dur) {
		return fmt.Errorf("envoy text line: duration %q", dur)
	}
	// "POST /pay?card=4242 HTTP/1.1"
	m, rest, _ := bytes.Cut(reqLine, []byte(" "))
	path, _, _ := bytes.Cut(rest, []byte(" "))
	r.method, r.path = dashB(m), path
	r.rid, r.authority, r.exhausted = dashB(r.rid), dashB(r.authority), dashB(r.exhausted)
	return p.envoyFields(start, code, dur, cluster, sni)
}

func numOrDash(b []byte) bool {
	if string(b) == "-" {
		return true
	}
	_, ok := atoi(b)
	return ok
}

// envoyFields fills what both Envoy formats share: time, status, duration, and the names.
func (p *parser) envoyFields(start, code, durMS, cluster, sni []byte) error {
	r := &p.r
	t, ok := parseTime(start)
	if !ok {
		return fmt.Errorf("start time %q: want an RFC 3339 time from 1970 to 2200", start)
	}
	r.start = t
	n, ok := atoi(code)
	if !ok {
		return fmt.Errorf("response code %q", code)
	}
	r.status = int(n)
	if ms, ok := atoi(durMS); ok {
		if ms > maxDuration/int64(time.Millisecond) {
			return fmt.Errorf("duration %d ms: over 10 years", ms)
		}
		r.dur = ms * int64(time.Millisecond)
	}
	r.method, r.rid, r.authority, r.exhausted = dashB(r.method), dashB(r.rid), dashB(r.authority), dashB(r.exhausted)
	r.path = stripQueryB(dashB(r.path))
	p.names(dashB(cluster), dashB(sni))
	return nil
}

// names sets direction, caller and target. Outbound (the caller's sidecar, or a gateway):
// the callee is the host of the upstream cluster (outbound|8080||frontend.ns.svc.cluster.local;
// a host outside the mesh, a ServiceEntry's, whole), the caller the stream's service. Inbound (the callee's sidecar): the callee is the host of
// the SNI the caller's sidecar sent (outbound_.8080_._.frontend.ns.svc.cluster.local), else of
// an inbound cluster that names one (inbound|8080|http|frontend...), else the stream's
// service; only without any of them the :authority, which behind an ingress gateway is the
// browser's Host and names no service.
func (p *parser) names(cluster, sni []byte) {
	r := &p.r
	dir, rest, _ := bytes.Cut(cluster, []byte("|"))
	if string(dir) == "inbound" {
		r.dir = Inbound
		switch {
		case len(hostOfSNI(sni)) > 0:
			r.target = p.serviceOfHost(hostOfSNI(sni))
		case len(hostOfCluster(rest)) > 0:
			r.target = p.serviceOfHost(hostOfCluster(rest))
		case p.src.Service != "":
			r.target = []byte(p.src.Service)
		default:
			r.target = p.serviceOfHost(r.authority)
		}
		return
	}
	r.dir = Outbound
	r.caller = []byte(p.src.Service)
	if name := routeOfCluster(cluster); len(name) > 0 {
		// Envoy Gateway names its clusters after the route rule (httproute/NS/NAME/rule/N):
		// the route names the callee; the :authority is the browser's Host.
		r.target = name
		return
	}
	if h := hostOfCluster(rest); len(h) > 0 {
		r.target = p.clusterHostName(h)
	} else {
		r.target = p.serviceOfHost(r.authority)
	}
}

// routeOfCluster is NAME of Envoy Gateway's cluster "httproute/NS/NAME/rule/N" (grpcroute,
// tcproute... alike), nil for any other cluster.
func routeOfCluster(cluster []byte) []byte {
	kind, rest, ok := bytes.Cut(cluster, []byte("/"))
	if !ok || !bytes.HasSuffix(kind, []byte("route")) {
		return nil
	}
	_, rest, ok = bytes.Cut(rest, []byte("/")) // the namespace
	if !ok {
		return nil
	}
	name, rest, ok := bytes.Cut(rest, []byte("/"))
	if !ok || len(name) == 0 || !bytes.HasPrefix(rest, []byte("rule/")) || bytes.Count(rest, []byte("/")) != 1 {
		return nil
	}
	return name
}

// hostOfCluster is HOST of "PORT|SUBSET|HOST" (the part of an Istio cluster name after its
// direction).
func hostOfCluster(rest []byte) []byte {
	i := bytes.LastIndexByte(rest, '|')
	if i < 0 || bytes.Count(rest, []byte("|")) != 2 {
		return nil
	}
	return rest[i+1:]
}

// hostOfSNI is HOST of Istio's mTLS SNI "outbound_.PORT_.SUBSET_.HOST".
func hostOfSNI(sni []byte) []byte {
	if !bytes.HasPrefix(sni, []byte("outbound_.")) {
		return nil
	}
	rest := sni[len("outbound_."):]
	for range 2 {
		i := bytes.Index(rest, []byte("_."))
		if i < 0 {
			return nil
		}
		rest = rest[i+2:]
	}
	return rest
}

func dashB(b []byte) []byte {
	if len(b) == 1 && b[0] == '-' {
		return nil
	}
	return b
}

func stripQueryB(p []byte) []byte {
	if i := bytes.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

func traceIDOfB(tp []byte) []byte {
	tp = bytes.TrimSpace(tp)
	// version-traceid-spanid-flags: 2-32-16-2
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' {
		return nil
	}
	id := tp[3:35]
	for _, c := range id {
		if c >= 'A' && c <= 'F' {
			return bytes.ToLower(id)
		}
	}
	return id
}

// clusterHostName names the host of an outbound cluster: a service of the mesh
// (NAME.NS.svc.CLUSTER-DOMAIN, NAME.NS.svc) by its first label, as ServiceOfHost; a host
// outside it (a ServiceEntry's api.stripe.com) whole, lower-cased: by its first label, a
// payment provider's "api" was taken for the mesh's own service api, and merged with it.
func (p *parser) clusterHostName(h []byte) []byte {
	if bytes.Contains(h, []byte(".svc.")) || bytes.HasSuffix(h, []byte(".svc")) || bytes.IndexByte(h, '.') < 0 || isIPv4B(h) {
		return p.serviceOfHost(h)
	}
	for _, c := range h {
		if c >= 'A' && c <= 'Z' {
			return bytes.ToLower(h) // rare: a copy
		}
	}
	return h
}

// serviceOfHost is ServiceOfHost over bytes: a sub-slice of h, or a lower-cased copy in the
// scratch buffer.
func (p *parser) serviceOfHost(h []byte) []byte {
	if len(h) > 0 && h[0] == '[' {
		if i := bytes.IndexByte(h, ']'); i > 0 {
			return h[1:i]
		}
	}
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && bytes.Count(h, []byte(":")) == 1 {
		h = h[:i]
	}
	if isIPv4B(h) {
		return h
	}
	if i := bytes.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	for _, c := range h {
		if c >= 'A' && c <= 'Z' {
			from := len(p.scratch)
			for _, c := range h {
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				p.scratch = append(p.scratch, c)
			}
			return p.scratch[from:]
		}
	}
	return h
}

func isIPv4B(h []byte) bool {
	if len(h) == 0 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// itoa for the CSV writer.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
