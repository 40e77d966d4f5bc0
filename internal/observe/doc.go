// Package observe answers "what really happened, per request" from access logs: it reads
// retrycap-proxy's per-attempt access log (JSON lines, internal/proxy/accesslog) and Envoy's and
// Istio's access logs in their default text and JSON formats (and Envoy Gateway's JSON), and
// ingress-nginx's default log-format-upstream (one line per client request, read as one attempt
// per upstream try it lists: ingressnginx.go), as written, inside the kubelet's
// CRI log files or as kubectl logs --timestamps/--prefix print them, gzip'd or not. Access-log
// lines it recognises and cannot read as HTTP attempts (Envoy's TCP connection lines, nginx's
// combined format, an ingress-nginx line that reached no upstream, HAProxy, JSON access logs of
// other shapes, Docker's json-file wrapper, a cloud load balancer's log: unread.go) are counted
// apart with why.
//
// It streams: each line is parsed in place by hand-written scanners (no reflection; a line is
// a format only with that format's exact field count, so a truncated line is bad, never a
// shorter format; a JSON field read twice or of the wrong kind makes it bad; a line over the
// limit is counted and skipped; keys, names, times and durations are bounded, so memory
// grows with the distinct keys, never with line length), folded into its key's
// aggregate (Idempotency-Key, else the traceparent trace id, else the request id: X-Request-Id,
// or the storm lab's baggage member storm-op) and forgotten: memory is per key (pointer-free
// slabs; a key's trace ids, services and call edges past 16 also in a set of its own, so a
// hot key costs no walk per line), never per line, and bounded (SetMaxKeys: over the bound
// the run stops, naming the line). A line that cannot be told from a cut one (the last line
// without its newline, in a format that ends in a bare field) is bad. The report gives per key the write-up's columns: attempts, chain
// links (distinct trace ids), the services that took part, the first attempt, the span, the
// failures (an answer whose body the proxy logged as cut after its head is one, whatever its
// status), and the observed amplification (the attempts at the deepest service the key
// reached). Lines at an Istio gateway and behind it are named by their upstream cluster or
// SNI, never by the browser's Host.
//
// The same aggregation is also written as a query for a log store (sql.go: PostgreSQL and
// ClickHouse over a table of attempts, whose rows CSVWriter writes; LogQL for Loki), and a
// store's rows are rendered like a file run's (StoreReport). The package is pure: readers in,
// a Report out; internal/observe/pgstore runs the query in PostgreSQL, the command is
// internal/cli/observe.go.
package observe
