package policy

import (
	"container/list"
	"sync"
	"time"
)

// KeyLedger remembers, per Idempotency-Key, how much chain budget the
// requests carrying that key have spent at an entry proxy, so a client that
// retries with the same key gets what is left rather than a fresh cap.
// Memory is bounded: at most max keys, least recently used evicted first,
// and entries older than ttl are forgotten.
type KeyLedger struct {
	ttl int64
	max int

	mu  sync.Mutex
	lru *list.List // front = most recent; values are *keyEntry
	m   map[string]*list.Element
}

type keyEntry struct {
	key   string
	spent int
	at    int64 // last update, unix ns
}

// NewKeyLedger makes a ledger. max <= 0 means 100000.
func NewKeyLedger(ttl time.Duration, max int) *KeyLedger {
	if max <= 0 {
		max = 100000
	}
	return &KeyLedger{ttl: int64(ttl), max: max, lru: list.New(), m: make(map[string]*list.Element)}
}

// Spent returns what the key has spent so far (0 if unknown or expired).
func (l *KeyLedger) Spent(key []byte, now int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[string(key)]
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[string(key)]; ok {
		ke := e.Value.(*keyEntry)
		if now-ke.at > l.ttl {
			ke.spent = 0
		}
		ke.spent += n
		ke.at = now
		l.lru.MoveToFront(e)
		return
	}
	ke := &keyEntry{key: string(key), spent: n, at: now}
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

// Len is the number of keys held.
func (l *KeyLedger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
