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

// Stats counts what a parse read. Lines = Attempts + Skipped + Bad + TooLong.
type Stats struct {
	Lines    int `json:"lines"`    // lines read
	Attempts int `json:"attempts"` // lines that were attempts
	Skipped  int `json:"skipped"`  // other lines (the proxy's own log, Envoy's startup lines, blank, unknown)
	Bad      int `json:"bad"`      // lines that looked like access-log lines but did not parse (a truncated line)
	TooLong  int `json:"too_long"` // lines over the line limit, not parsed
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Lines += o.Lines
	s.Attempts += o.Attempts
	s.Skipped += o.Skipped
	s.Bad += o.Bad
	s.TooLong += o.TooLong
}

// String is the stats line observe prints on stderr.
func (s Stats) String() string {
	return fmt.Sprintf("%s lines read: %s attempts, %s skipped, %s bad, %s over the line limit",
		Thousands(s.Lines), Thousands(s.Attempts), Thousands(s.Skipped), Thousands(s.Bad), Thousands(s.TooLong))
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
	return failed(r.status, r.grpc)
}

func failed(status, grpc int) bool {
	if status == 0 || status >= 500 || status == 429 {
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
		Error: string(r.errText), TraceID: string(r.traceID), IdemKey: string(r.idem), RequestID: string(r.rid),
		StormOp: string(r.stormOp),
	}
}

// parser holds the per-stream scratch the line parsers reuse.
type parser struct {
	src     Source
	scratch []byte
	toks    [envoyMaxTokens]tok
	r       rec
}

type lineKind uint8

const (
	lineSkipped lineKind = iota
	lineBad
	lineAttempt
)

// parse reads one line (already without its CRI / kubectl prefixes) into p.r.
func (p *parser) parse(line []byte) (lineKind, error) {
	p.scratch = p.scratch[:0]
	p.r.reset()
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return lineSkipped, nil
	}
	switch line[0] {
	case '{':
		return p.parseJSON(line)
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
		return lineAttempt, nil
	}
	return lineSkipped, nil
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
	return scanLines(r, src, maxLine, p, func(r *rec) { emit(r.attempt()) })
}

// ParseLine parses one line: ok false (and no error) for a line of no known format.
func ParseLine(line []byte, src Source) (a Attempt, ok bool, err error) {
	p := &parser{src: src}
	k, err := p.parse(stripShapes(line, nil))
	switch k {
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
		bin, bout, grpc, tp                               []byte
		haveCode, haveStart                               bool
	)
	err := scanJSONObject(line, &p.scratch, func(k, v []byte, isStr bool) {
		if !isStr && string(v) == "null" {
			return
		}
		switch string(k) {
		case "log":
			logMark = v
		case "time":
			timeField = v
		case "start_time":
			startTime, haveStart = v, true
		case "service":
			svc = v
		case "upstream":
			upstream = v
		case "method":
			r.method = v
		case "authority":
			r.authority = v
		case "path":
			r.path = v
		case "attempt":
			attempt = v
		case "budget_in":
			bin = v
		case "budget_out":
			bout = v
		case "status":
			code = v
		case "response_code":
			code, haveCode = v, true
		case "grpc_status":
			grpc = v
		case "duration_us":
			durUS = v
		case "duration":
			durMS = v
		case "exhausted":
			r.exhausted = v
		case "response_flags":
			r.exhausted = v
		case "error":
			r.errText = v
		case "trace_id":
			r.traceID = v
		case "traceparent":
			tp = v
		case "idempotency_key":
			r.idem = v
		case "request_id":
			r.rid = v
		case "storm_op":
			r.stormOp = v
		case "upstream_cluster":
			cluster = v
		case "requested_server_name":
			sni = v
		}
	})
	if err != nil {
		if bytes.Contains(line, []byte(`"`+RetrycapLogMarker+`"`)) || bytes.Contains(line, []byte(`"start_time"`)) {
			return lineBad, fmt.Errorf("%w (truncated?)", err)
		}
		return lineSkipped, nil
	}
	switch {
	case string(logMark) == RetrycapLogMarker:
		r.format, r.dir = FormatRetrycap, Outbound
		t, ok := parseTime(timeField)
		if !ok {
			return lineBad, fmt.Errorf("time %q", timeField)
		}
		r.start = t
		if n, ok := atoi(durUS); ok {
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
		return lineAttempt, nil
	}
	return lineSkipped, nil
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
		return fmt.Errorf("start time %q", start)
	}
	r.start = t
	n, ok := atoi(code)
	if !ok {
		return fmt.Errorf("response code %q", code)
	}
	r.status = int(n)
	if ms, ok := atoi(durMS); ok {
		r.dur = ms * int64(time.Millisecond)
	}
	r.method, r.rid, r.authority, r.exhausted = dashB(r.method), dashB(r.rid), dashB(r.authority), dashB(r.exhausted)
	r.path = stripQueryB(dashB(r.path))
	p.names(dashB(cluster), dashB(sni))
	return nil
}

// names sets direction, caller and target. Outbound (the caller's sidecar, or a gateway):
// the callee is the host of the upstream cluster (outbound|8080||frontend.ns.svc.cluster.local),
// the caller the stream's service. Inbound (the callee's sidecar): the callee is the host of
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
	if h := hostOfCluster(rest); len(h) > 0 {
		r.target = p.serviceOfHost(h)
	} else {
		r.target = p.serviceOfHost(r.authority)
	}
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
