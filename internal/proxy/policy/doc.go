// Package policy holds the retry, retry-budget, circuit-breaker, backoff and
// chain-budget logic of retrycap-proxy, independent of any HTTP engine.
//
// Everything here is pure (a clock is passed in or injected), safe for
// concurrent use where stated, and allocation-free on the per-request path,
// so the data path can call it for every attempt and the logic can be tested
// with tables and a fake clock instead of real traffic.
package policy
