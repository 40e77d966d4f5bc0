// Package accesslog is retrycap-proxy's per-attempt access log (--access-log=off|stdout|PATH):
// one JSON line per attempt, written off the request path. The data path fills a preallocated
// record (Begin, set the fields, Commit: no allocation, no lock, no I/O); one background
// goroutine formats the committed records into its own buffer and writes them.
//
// Each event loop has a ring of its own (Writer.NewRing): one producer, records packed into
// whole cache lines, so that no loop shares a line with another and the writer reads a short
// record's 3 lines once, publishing how far it read once per batch. The goroutine engine and
// the h2 paths share one lock-free multi-producer ring of fixed slots (Writer.Begin). The
// writer polls while lines come and sleeps only after 100 ms without one: it is not woken per
// record. When a ring is full (the writer fell behind: a slow disk, a blocked stdout) the line
// is dropped and counted (Dropped, exported as retrycap_proxy_access_log_dropped_total), never
// waited for. A connection's lines are written in the order of its attempts. The line format
// is what internal/observe reads.
package accesslog
