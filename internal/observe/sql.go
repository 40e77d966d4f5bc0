package observe

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The store's side: the same aggregation as a query over a table of attempts, so that a log
// store holding a day of a gateway's lines does the work (docs/observe.md, "In a log store").
//
// The table has one row per access-log line, in the columns Columns lists: the fields every
// format has once a line is read (the direction and the names as observe derives them: the
// callee from the SNI / upstream cluster, not the Host). `observe -o csv` writes the rows
// (the loader); a log pipeline can fill them itself.

// Column is one column of the table.
type Column struct {
	Name, Postgres, ClickHouse, What string
}

// Columns of the table, in the order -o csv writes them.
var Columns = []Column{
	{"start_time", "timestamptz NOT NULL", "DateTime64(6, 'UTC')", "the attempt's start"},
	{"duration_us", "bigint NOT NULL", "Int64", "to its response (or failure), µs"},
	{"direction", "text NOT NULL", "LowCardinality(String)", "inbound (logged by the callee's sidecar) or outbound (by the caller's proxy or sidecar, or a gateway)"},
	{"caller", "text", "String", "the service that made the attempt, when known"},
	{"service", "text NOT NULL", "LowCardinality(String)", "the service the attempt went to"},
	{"method", "text", "LowCardinality(String)", "the request's method"},
	{"authority", "text", "String", "the request's :authority / Host"},
	{"path", "text", "String", "the path without its query"},
	{"status", "integer NOT NULL", "Int32", "the HTTP status, 0 for no response"},
	{"grpc_status", "integer", "Nullable(Int32)", "the grpc-status, NULL without one"},
	{"flags", "text", "String", "retrycap's exhausted reason or Envoy's response flags"},
	{"error", "text", "String", "retrycap's transport failure"},
	{"trace_id", "text", "String", "the traceparent's trace id"},
	{"idempotency_key", "text", "String", "the Idempotency-Key"},
	{"request_id", "text", "String", "X-Request-Id"},
	{"storm_op", "text", "String", "the storm lab's storm-op"},
	{"cut", "text", "LowCardinality(String)", "retrycap's cut: who ended a streamed body short (upstream, client, proxy), a failure"},
}

// Dialect is a log store's query language.
type Dialect string

// Dialects.
const (
	Postgres   Dialect = "postgres"
	ClickHouse Dialect = "clickhouse"
)

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// CheckTable refuses a table name that is not a (schema-qualified) SQL identifier: it is
// pasted into the query.
func CheckTable(t string) error {
	if !identRE.MatchString(t) {
		return fmt.Errorf("table %q: want an identifier (letters, digits, _; optionally schema.table)", t)
	}
	return nil
}

// CreateTable is the table's DDL in the dialect.
func CreateTable(d Dialect, table string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (\n", table)
	for i, c := range Columns {
		typ := c.Postgres
		if d == ClickHouse {
			typ = c.ClickHouse
		}
		sep := ","
		if i == len(Columns)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  %-16s %s%s -- %s\n", c.Name, typ, sep, c.What)
	}
	b.WriteString(")")
	if d == ClickHouse {
		b.WriteString(" ENGINE = MergeTree ORDER BY start_time")
	}
	b.WriteString(";\n")
	return b.String()
}

// pgBase is the per-key and per-service aggregation in PostgreSQL; %[1]s is the table.
// kind: 0 idempotency-key, 1 trace-id, 2 request-id, 3 storm-op (the key's precedence).
const pgBase = `WITH a AS (
  SELECT COALESCE(NULLIF(idempotency_key, ''), NULLIF(trace_id, ''), NULLIF(request_id, ''), NULLIF(storm_op, '')) AS key,
         CASE WHEN COALESCE(idempotency_key, '') <> '' THEN 0 WHEN COALESCE(trace_id, '') <> '' THEN 1
              WHEN COALESCE(request_id, '') <> '' THEN 2 ELSE 3 END AS kind,
         direction, NULLIF(caller, '') AS caller, service, NULLIF(method, '') AS method, start_time,
         start_time + duration_us * interval '1 microsecond' AS end_time, NULLIF(trace_id, '') AS trace_id,
         (status = 0 OR status >= 500 OR status = 429 OR COALESCE(grpc_status, 0) NOT IN (0, 3, 5, 6, 7, 9, 11, 16) OR COALESCE(cut, '') <> '') AS failed
  FROM %[1]s
),
s AS ( -- per key and service; at a service with inbound lines only those count (the caller's line of the same attempt is not counted twice)
  SELECT key, service,
         CASE WHEN count(*) FILTER (WHERE direction = 'inbound') > 0 THEN count(*) FILTER (WHERE direction = 'inbound') ELSE count(*) END AS attempts,
         CASE WHEN count(*) FILTER (WHERE direction = 'inbound') > 0 THEN count(*) FILTER (WHERE direction = 'inbound' AND failed)
              ELSE count(*) FILTER (WHERE failed) END AS failures,
         min(start_time) AS first
  FROM a WHERE key IS NOT NULL GROUP BY key, service
),
k AS ( -- per key: chain links are the distinct trace ids
  SELECT key, min(kind) AS kind, count(DISTINCT trace_id) AS chain_links, min(start_time) AS first, max(end_time) AS last_end,
         string_agg(DISTINCT method, ',' ORDER BY method) AS methods,
         array_agg(DISTINCT caller) FILTER (WHERE caller IS NOT NULL AND caller <> service) AS callers
  FROM a WHERE key IS NOT NULL GROUP BY key
),
r AS (
  SELECT k.key, k.kind, sum(s.attempts)::bigint AS attempts, k.chain_links, sum(s.failures)::bigint AS failures, k.first,
         (extract(epoch FROM k.last_end - k.first) * 1000000)::bigint AS span_us,
         string_agg(s.service || ' ' || s.attempts, ' > ' ORDER BY s.first, s.service) AS services,
         (array_agg(s.service ORDER BY s.first DESC, s.service DESC))[1] AS deepest,
         (array_agg(s.attempts ORDER BY s.first DESC, s.service DESC))[1] AS amplification,
         (SELECT string_agg(c, ',' ORDER BY c) FROM unnest(k.callers) AS c WHERE c <> ALL (array_agg(s.service))) AS callers,
         k.methods
  FROM k JOIN s USING (key) GROUP BY k.key, k.kind, k.chain_links, k.first, k.last_end, k.methods, k.callers
)
`

// chBase is the same in ClickHouse; times are compared as µs since the epoch.
const chBase = `WITH a AS (
  SELECT coalesce(nullIf(idempotency_key, ''), nullIf(trace_id, ''), nullIf(request_id, ''), nullIf(storm_op, '')) AS key,
         multiIf(idempotency_key != '', 0, trace_id != '', 1, request_id != '', 2, 3) AS kind,
         direction, caller, service, method, toUnixTimestamp64Micro(start_time) AS start_us,
         toUnixTimestamp64Micro(start_time) + duration_us AS end_us, trace_id,
         (status = 0 OR status >= 500 OR status = 429 OR ifNull(grpc_status, 0) NOT IN (0, 3, 5, 6, 7, 9, 11, 16) OR cut != '') AS failed
  FROM %[1]s
),
s AS (
  SELECT key, service,
         if(countIf(direction = 'inbound') > 0, countIf(direction = 'inbound'), count()) AS attempts,
         if(countIf(direction = 'inbound') > 0, countIf(direction = 'inbound' AND failed), countIf(failed)) AS failures,
         min(start_us) AS first_us
  FROM a WHERE key IS NOT NULL GROUP BY key, service
),
k AS (
  SELECT key, min(kind) AS kind, uniqExactIf(trace_id, trace_id != '') AS chain_links, min(start_us) AS first_us, max(end_us) AS last_end_us,
         arrayStringConcat(arraySort(groupUniqArrayIf(method, method != '')), ',') AS methods,
         groupUniqArrayIf(caller, caller != '' AND caller != service) AS callers
  FROM a WHERE key IS NOT NULL GROUP BY key
),
r AS (
  SELECT k.key AS key, any(k.kind) AS kind, sum(s.attempts) AS attempts, any(k.chain_links) AS chain_links, sum(s.failures) AS failures,
         fromUnixTimestamp64Micro(any(k.first_us), 'UTC') AS first, any(k.last_end_us) - any(k.first_us) AS span_us,
         arrayStringConcat(arrayMap(x -> concat(x.2, ' ', toString(x.3)), arraySort(groupArray((s.first_us, s.service, s.attempts)))), ' > ') AS services,
         arrayReverseSort(groupArray((s.first_us, s.service, s.attempts)))[1].2 AS deepest,
         arrayReverseSort(groupArray((s.first_us, s.service, s.attempts)))[1].3 AS amplification,
         arrayStringConcat(arraySort(arrayFilter(c -> NOT has(groupArray(s.service), c), any(k.callers))), ',') AS callers,
         any(k.methods) AS methods
  FROM k INNER JOIN s ON k.key = s.key GROUP BY k.key
)
`

// ListQuery is the query for the keys with more than threshold attempts, worst first, at most
// limit (0: all): one row per key with the columns KeyRow scans.
func ListQuery(d Dialect, table string, threshold, limit int) (string, error) {
	if err := CheckTable(table); err != nil {
		return "", err
	}
	base, order := pgBase, `ORDER BY attempts DESC, amplification DESC, first, key COLLATE "C"`
	if d == ClickHouse {
		base, order = chBase, "ORDER BY attempts DESC, amplification DESC, first, key"
	} else if d != Postgres {
		return "", fmt.Errorf("dialect %q: want postgres or clickhouse", d)
	}
	q := fmt.Sprintf(base, table) + fmt.Sprintf(
		"SELECT key, kind, attempts, chain_links, failures, first, span_us, services, deepest, amplification, callers, methods\nFROM r WHERE attempts > %d\n%s", threshold, order)
	if limit > 0 {
		q += fmt.Sprintf("\nLIMIT %d", limit)
	}
	return q + ";\n", nil
}

// SummaryQuery is the query for the summary line: one row (SummaryRow's columns).
func SummaryQuery(d Dialect, table string, threshold int) (string, error) {
	if err := CheckTable(table); err != nil {
		return "", err
	}
	switch d {
	case Postgres:
		return fmt.Sprintf(pgBase, table) + fmt.Sprintf(`SELECT (SELECT count(*) FROM a) AS attempts_read, (SELECT count(*) FROM a WHERE key IS NULL) AS keyless,
       count(*) AS keys, count(*) FILTER (WHERE attempts > %d) AS over,
       COALESCE(max(attempts), 0) AS peak, (array_agg(key ORDER BY attempts DESC, key COLLATE "C"))[1] AS peak_key,
       COALESCE(max(amplification), 0) AS peak_amplification, (array_agg(deepest ORDER BY amplification DESC, deepest COLLATE "C"))[1] AS peak_at,
       COALESCE(max(span_us), 0) AS longest_span_us, (array_agg(key ORDER BY span_us DESC, key COLLATE "C"))[1] AS longest_key
FROM r;
`, threshold), nil
	case ClickHouse:
		return fmt.Sprintf(chBase, table) + fmt.Sprintf(`SELECT (SELECT count() FROM a) AS attempts_read, (SELECT count() FROM a WHERE key IS NULL) AS keyless,
       count() AS keys, countIf(attempts > %d) AS over,
       max(attempts) AS peak, argMin(key, (-attempts, key)) AS peak_key,
       max(amplification) AS peak_amplification, argMin(deepest, (-amplification, deepest)) AS peak_at,
       max(span_us) AS longest_span_us, argMin(key, (-span_us, key)) AS longest_key
FROM r;
`, threshold), nil
	}
	return "", fmt.Errorf("dialect %q: want postgres or clickhouse", d)
}

// KeyRow is one row of ListQuery.
type KeyRow struct {
	Key                  string
	Kind                 int
	Attempts, ChainLinks int64
	Failures             int64
	First                time.Time
	SpanUS               int64
	Services, Deepest    string
	Amplification        int64
	Callers, Methods     *string
}

// SummaryRow is SummaryQuery's row.
type SummaryRow struct {
	AttemptsRead, Keyless, Keys, Over, Peak, PeakAmplification, LongestSpanUS int64
	PeakKey, PeakAt, LongestKey                                               *string
}

// StoreReport renders a store's rows as a Report, the way a file run's reads.
func StoreReport(rows []KeyRow, sum SummaryRow, threshold int) (*Report, error) {
	r := &Report{Stats: Stats{Lines: int(sum.AttemptsRead), Attempts: int(sum.AttemptsRead)}, Keyless: int(sum.Keyless),
		Keys: int(sum.Keys), Threshold: threshold, OverCount: int(sum.Over), Over: []KeyReport{}, PeakAttempts: int(sum.Peak),
		PeakAmplification: int(sum.PeakAmplification), LongestSpan: time.Duration(sum.LongestSpanUS) * time.Microsecond, FromStore: true}
	r.PeakKey, r.PeakAmplificationAt, r.LongestSpanKey = deref(sum.PeakKey), deref(sum.PeakAt), deref(sum.LongestKey)
	for _, row := range rows {
		if row.Kind < 0 || row.Kind >= int(kindNone) {
			return nil, fmt.Errorf("key %q: kind %d", row.Key, row.Kind)
		}
		kr := KeyReport{Key: row.Key, Kind: kindNames[row.Kind], Attempts: int(row.Attempts), ChainLinks: int(row.ChainLinks),
			Failures: int(row.Failures), First: row.First.UTC(), Span: time.Duration(row.SpanUS) * time.Microsecond,
			Deepest: row.Deepest, Amplification: int(row.Amplification), Methods: deref(row.Methods)}
		for i, part := range strings.Split(row.Services, " > ") {
			sp := strings.LastIndexByte(part, ' ')
			n, err := strconv.Atoi(part[sp+1:])
			if sp < 0 || err != nil {
				return nil, fmt.Errorf("key %q: services %q: want \"NAME N > ...\"", row.Key, row.Services)
			}
			kr.Services = append(kr.Services, ServiceAttempts{Service: part[:sp], Attempts: n, Depth: i + 1, Failures: -1})
		}
		if c := deref(row.Callers); c != "" {
			kr.Callers = strings.Split(c, ",")
		}
		r.Over = append(r.Over, kr)
	}
	return r, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// LogQL is the aggregation Loki can do: attempts per key over the window, the keys over the
// threshold, for retrycap's JSON log, Istio's JSON and Istio's text format (selector picks the
// streams). Loki has no distinct count and cannot drop the caller's line of an attempt the
// callee logged too, so the Istio queries keep the inbound lines only (an attempt that never
// reached the callee's sidecar is not counted), and chain links and services are not there.
func LogQL(selector string, window time.Duration, threshold, limit int) string {
	if limit <= 0 {
		limit = 20
	}
	w := window.String()
	if window <= 0 {
		w = "1h"
	}
	keyTmpl := "`{{ or .idempotency_key .trace_id .request_id .storm_op }}`"
	return fmt.Sprintf(`# retrycap-proxy's access log (JSON): attempts per key
topk(%[3]d, sum by (key) (count_over_time(%[1]s |= "retrycap-access" | json | label_format key=%[4]s | key != "" [%[2]s])) > %[5]d)

# Istio's JSON access log (meshConfig.accessLogEncoding: JSON): inbound attempts per x-request-id
topk(%[3]d, sum by (request_id) (count_over_time(%[1]s |= "\"start_time\"" | json | upstream_cluster =~ "inbound[|].*" | request_id != "" [%[2]s])) > %[5]d)

# Istio's default text access log: the same through its fields
topk(%[3]d, sum by (request_id) (count_over_time(%[1]s |~ "^\\[" | pattern `+"`"+`[<start_time>] "<method> <path> <_>" <response_code> <response_flags> <_> <_> "<_>" <_> <_> <duration> <_> "<_>" "<_>" "<request_id>" "<authority>" "<_>" <upstream_cluster> <_> <_> <_> <sni> <_>`+"`"+` | upstream_cluster =~ "inbound[|].*" | request_id != "-" [%[2]s])) > %[5]d)
`, selector, w, limit, keyTmpl, threshold)
}

// CSVWriter writes attempts as rows of the table (the loader: -o csv).
type CSVWriter struct {
	w      *csv.Writer
	header bool
	row    []string
}

// NewCSVWriter writes to w, the header first.
func NewCSVWriter(w io.Writer) *CSVWriter {
	return &CSVWriter{w: csv.NewWriter(w), row: make([]string, len(Columns))}
}

func (c *CSVWriter) write(r *rec) {
	if !c.header {
		for i, col := range Columns {
			c.row[i] = col.Name
		}
		_ = c.w.Write(c.row)
		c.header = true
	}
	grpc := ""
	if r.grpc >= 0 {
		grpc = strconv.Itoa(r.grpc)
	}
	c.row = append(c.row[:0], time.Unix(0, r.start).UTC().Format("2006-01-02T15:04:05.000000Z"), itoa(r.dur/1000), string(r.dir),
		storeText(r.caller), storeText(r.target), storeText(r.method), storeText(r.authority), storeText(r.path), strconv.Itoa(r.status), grpc,
		storeText(r.exhausted), storeText(r.errText), storeText(r.traceID), storeText(r.idem), storeText(r.rid), storeText(r.stormOp), storeText(r.cut))
	_ = c.w.Write(c.row)
}

// storeText is a field as a text column can hold it: a log's bytes as they are, but Go-quoted
// when they are not UTF-8 or hold a NUL ("k\xff", "k\x00"), which PostgreSQL's text refuses:
// one such header in a day of lines failed the whole \copy ("invalid byte sequence for
// encoding UTF8"). The quoted form is what the file run's table prints for such a value, so
// the store's report prints the same.
func storeText(b []byte) string {
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// Consume parses r and writes its attempts as rows.
func (c *CSVWriter) Consume(r io.Reader, src Source, maxLine int) (Stats, error) {
	p := &parser{src: src}
	return scanLines(r, src, maxLine, p, func(r *rec) bool { c.write(r); return true })
}

// Flush writes what is buffered, the header even without a row.
func (c *CSVWriter) Flush() error {
	if !c.header {
		c.write0()
	}
	c.w.Flush()
	return c.w.Error()
}

func (c *CSVWriter) write0() {
	for i, col := range Columns {
		c.row[i] = col.Name
	}
	_ = c.w.Write(c.row)
	c.header = true
}
