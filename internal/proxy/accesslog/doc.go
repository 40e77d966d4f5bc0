// Package accesslog is retrycap-proxy's per-attempt access log (--access-log=off|stdout|PATH):
// one JSON line per attempt, written off the request path. The data path fills a preallocated
// slot of a bounded lock-free ring (Begin, set the fields, Commit: no allocation, no lock, no
// I/O); one background goroutine formats the committed slots into its own buffer and writes
// them. When the ring is full (the writer fell behind: a slow disk, a blocked stdout) the line
// is dropped and counted (Dropped, exported as retrycap_proxy_access_log_dropped_total), never
// waited for. The line format is what internal/observe reads.
package accesslog
