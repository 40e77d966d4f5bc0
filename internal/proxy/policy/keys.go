package policy

import (
	"bytes"
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"hash/maphash"
	"sync"
	"time"
)

// KeyLedger remembers, per Idempotency-Key, how much chain budget the
// requests carrying that key have spent at an entry proxy, so a client that
// retries with the same key gets what is left rather than a fresh cap.
// Memory is bounded: at most max keys, least recently used evicted first,
// and entries older than ttl are forgotten. A key is held as a 128-bit
// digest, not its bytes: a client chooses the key's length (up to the
// head's limit, 1 MB on h2), and 100,000 keys of 1 MB each held as they
// came would be 100 GB.
type KeyLedger struct {
	ttl int64
	max int

	// seeds of the digest: random per ledger, so a client cannot make two
	// of its keys collide (a collision could only merge their spending:
	// lower a budget, never raise it).
	seeds [2]maphash.Seed

	mu  sync.Mutex
	lru *list.List // front = most recent; values are *keyEntry
	m   map[keyDigest]*list.Element
}

// keyDigest is a key's fixed-size stand-in in the ledger.
type keyDigest [2]uint64

type keyEntry struct {
	key   keyDigest
	spent int
	at    int64 // last update, unix ns
}

// NewKeyLedger makes a ledger. max <= 0 means 100000.
func NewKeyLedger(ttl time.Duration, max int) *KeyLedger {
	if max <= 0 {
		max = 100000
	}
	return &KeyLedger{ttl: int64(ttl), max: max, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		lru: list.New(), m: make(map[keyDigest]*list.Element)}
}

func (l *KeyLedger) digest(key []byte) keyDigest {
	return keyDigest{maphash.Bytes(l.seeds[0], key), maphash.Bytes(l.seeds[1], key)}
}

// Spent returns what the key has spent so far (0 if unknown or expired).
func (l *KeyLedger) Spent(key []byte, now int64) int {
	d := l.digest(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[d]
	if !ok {
		return 0
	}
	ke := e.Value.(*keyEntry)
	if now-ke.at > l.ttl {
		l.lru.Remove(e)
		delete(l.m, ke.key)
		return 0
	}
	return ke.spent
}

// Add records that a request with key spent n more.
func (l *KeyLedger) Add(key []byte, n int, now int64) {
	d := l.digest(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[d]; ok {
		ke := e.Value.(*keyEntry)
		if now-ke.at > l.ttl {
			ke.spent = 0
		}
		ke.spent += n
		ke.at = now
		l.lru.MoveToFront(e)
		return
	}
	ke := &keyEntry{key: d, spent: n, at: now}
	l.m[ke.key] = l.lru.PushFront(ke)
	for l.lru.Len() > l.max {
		old := l.lru.Back()
		l.lru.Remove(old)
		delete(l.m, old.Value.(*keyEntry).key)
	}
	// Drop a few expired entries from the back so idle keys do not linger
	// until evicted by size.
	for i := 0; i < 4; i++ {
		old := l.lru.Back()
		if old == nil || now-old.Value.(*keyEntry).at <= l.ttl {
			break
		}
		l.lru.Remove(old)
		delete(l.m, old.Value.(*keyEntry).key)
	}
}

// A request may carry several Idempotency-Key fields of different values
// (which one an upstream deduplicates by is its business: the first, the
// last, the list). It is charged under every one of them and gets what the
// most spent of them left, so that no value carries a fresh budget: charged
// under the first alone, [k2, k3] then k3 alone reached an upstream that
// reads the last one 3 + 3 times under cap 4. others are the values besides
// key (nil for the one field of nearly every request).

// SpentMost is the most key or any of others has spent.
func (l *KeyLedger) SpentMost(key []byte, others [][]byte, now int64) int {
	n := l.Spent(key, now)
	for _, k := range others {
		n = max(n, l.Spent(k, now))
	}
	return n
}

// AddAll records that a request with key and others spent n more, under each.
func (l *KeyLedger) AddAll(key []byte, others [][]byte, n int, now int64) {
	l.Add(key, n, now)
	for _, k := range others {
		l.Add(k, n, now)
	}
}

// OtherKeys is the distinct non-empty values of values besides key (key
// itself: the first non-empty one when key is empty), for SpentMost and
// AddAll; nil when there are none.
func OtherKeys(values [][]byte) (key []byte, others [][]byte) {
	for _, v := range values {
		switch {
		case len(v) == 0 || bytes.Equal(v, key):
		case len(key) == 0:
			key = v
		default:
			dup := false
			for _, o := range others {
				dup = dup || bytes.Equal(o, v)
			}
			if !dup {
				others = append(others, bytes.Clone(v))
			}
		}
	}
	return key, others
}

// Len is the number of keys held.
func (l *KeyLedger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// GeneratedKeyPrefix starts every Idempotency-Key an entry proxy generates
// for a POST or PATCH that came without one. The key lets the client retry
// safely and counts those retries against the chain cap (KeyLedger); it is
// not the app's promise that the request is idempotent, so no proxy retries
// a request for carrying it: an app that propagates Idempotency-Key passes
// the generated key down the chain, and a keyless POST must still be sent
// once at every hop (DESIGN: "a POST/PATCH without Idempotency-Key is never
// retried"). The prefix is how proxies further down tell the two apart;
// a client that sends such a key itself gets the same treatment.
const GeneratedKeyPrefix = "retrycap-gen-"

// NewKey generates an Idempotency-Key for a POST or PATCH that came to an
// entry proxy without one: GeneratedKeyPrefix and 32 hex digits of
// crypto/rand (both protocols generate it here, so every key an entry
// proxy makes has the one format proxies further down recognise).
func NewKey() []byte {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand: Go 1.24+ panics rather than return an error)
	out := make([]byte, len(GeneratedKeyPrefix)+hex.EncodedLen(len(b)))
	copy(out, GeneratedKeyPrefix)
	hex.Encode(out[len(GeneratedKeyPrefix):], b[:])
	return out
}

// IsGeneratedKey reports whether key is one an entry proxy generated
// (GeneratedKeyPrefix, compared without regard to case, as header values
// may be rewritten by intermediaries).
func IsGeneratedKey(key []byte) bool {
	const p = GeneratedKeyPrefix
	if len(key) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != p[i] {
			return false
		}
	}
	return true
}

// RetryableKey reports whether an Idempotency-Key makes a POST or PATCH
// retryable: present and not generated by a proxy.
func RetryableKey(key []byte) bool { return len(key) > 0 && !IsGeneratedKey(key) }

// KeyRetryable reports whether an Idempotency-Key makes a POST or PATCH
// retryable toward an upstream: a key the client sent (RetryableKey), or any
// key, a generated one included, when the upstream is declared to
// deduplicate by key (--dedup-upstreams): only there does a key the proxy
// made up prove anything, because only there does a second copy of the
// request do nothing. The one rule of both protocols (HTTP/1.1 and h2).
func KeyRetryable(key []byte, dedupUpstream bool) bool {
	return RetryableKey(key) || (dedupUpstream && len(key) > 0)
}

// MayResend is the rule for a request whose attempt failed on a pooled
// (reused) connection before any byte of an answer came back, Go's
// net/http transport's: it may be sent again, on a fresh connection and
// within the same attempt, only when it provably never reached the upstream
// (the connection was seen closed before the write, or the write failed
// before any byte of the request left: wroteAny false), or when it is
// replayable anyway (an idempotent method, a key that makes it retryable,
// a body within --max-replay-bytes). Otherwise the upstream may have it and
// be running it: the attempt failed, and a request that is not retryable
// gets the proxy's 502, never a second copy.
func MayResend(wroteAny, replayable bool) bool { return !wroteAny || replayable }
