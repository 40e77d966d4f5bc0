// Package promquery is the thin adapter between Prometheus' HTTP API (client_golang's api and
// api/prometheus/v1) and internal/observed and internal/telemetry: it runs the bounded instant
// queries (a timeout, a series limit, a bound on each answer's bytes, an error answer's too:
// --prometheus-max-answer-size, size.go) for the proxies', Envoy's and Linkerd's per-upstream counters over a window
// (each read by telemetry.Calls, the graph's reader: one figure for one edge) and joins
// their answers into observed.Series (a series whose namespace a scrape renamed
// exported_namespace kept apart, never an edge: Join), and telemetry.Queries into telemetry's observed graph
// (graph.go; when none of them answered a series, telemetry.PresenceQuery says whether the
// series exist). An answer that is not a vector of counts, each series once, is refused here,
// naming the query (so is an answer whose "status" is not success or error, a series without
// a value or whose value is not a [time, value] pair, a key given twice (pairs.go, both checked as
// the answer is read), a redirect to another host or one that would drop the query's POST; a URL's
// password and query values are never said: RedactURL): its series
// are checked once, as decoded, by telemetry.CheckVector (the one
// check of values and duplicates), and the graph's are handed to telemetry.Read as checked.
// Everything that decides (per-edge tries, the product along paths, the conditions) is in
// internal/observed and internal/telemetry.
package promquery
