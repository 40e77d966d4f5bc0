package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The live lookup's bounds, the LimitRanger's own (plugin/pkg/admission/limitranger: an LRU of
// 10,000 namespaces, 30 s), with a smaller table: what the injector keeps per namespace is a
// list that is almost always empty.
const (
	limitRangeLiveTTL     = 30 * time.Second
	limitRangeLiveEntries = 4096
	// limitRangeLiveWait bounds one live list: within the request's podInjectorCacheWait, so
	// the API server still gets the injector's answer when the list is slow.
	limitRangeLiveWait = time.Second
)

// limitRangeLookup is the LimitRanges of a namespace as the injector judges the proxy against
// them: the manager's cache, and, where the cache has none, the API server itself (live), as the
// API server's own LimitRanger does. A LimitRange created in the same apply as a Deployment can
// reach the API server an instant before its pods while the cache has not seen it yet; judged
// without it, a pod the LimitRange refuses for its proxy was injected and refused whole, so no pod
// of the workload was created. A namespace's live answer is kept limitRangeLiveTTL, for at most
// limitRangeLiveEntries namespaces (so a namespace without LimitRanges costs one list per TTL, not
// one per pod), and simultaneous misses of one namespace make one list (singleflight). A live
// list that fails is logged and the cache's answer stands: the pod is decided as before.
type limitRangeLookup struct {
	cache client.Reader
	live  client.Reader // nil: the cache only
	log   logr.Logger
	now   func() time.Time

	group   singleflight.Group
	mu      sync.Mutex
	entries map[string]liveLimitRanges
	lists   int // live lists made, for the tests
	waiting int // callers that asked for a live list, for the tests
}

type liveLimitRanges struct {
	expiry time.Time
	items  []corev1.LimitRange
}

func newLimitRangeLookup(cache, live client.Reader, log logr.Logger) *limitRangeLookup {
	return &limitRangeLookup{cache: cache, live: live, log: log, now: time.Now, entries: map[string]liveLimitRanges{}}
}

// List is the LimitRanges of namespace ns.
func (l *limitRangeLookup) List(ctx context.Context, ns string) ([]corev1.LimitRange, error) {
	var cached corev1.LimitRangeList
	if err := l.cache.List(ctx, &cached, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the LimitRanges of namespace %s from the cache: %w", ns, err)
	}
	if len(cached.Items) > 0 || l.live == nil {
		return cached.Items, nil
	}
	l.mu.Lock()
	e, ok := l.entries[ns]
	l.mu.Unlock()
	if ok && l.now().Before(e.expiry) {
		return e.items, nil
	}
	// The shared list runs on a context of its own (the first caller's values, not its
	// cancellation) and each caller waits on its own: a first admission request cancelled
	// (its client gone, its webhook timeout) failed the list for every request joined to it,
	// which then judged the pod without the LimitRange (adv20).
	l.mu.Lock()
	l.waiting++
	l.mu.Unlock()
	ch := l.group.DoChan(ns, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitRangeLiveWait)
		defer cancel()
		var live corev1.LimitRangeList
		if err := l.live.List(lctx, &live, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		l.store(ns, live.Items)
		return live.Items, nil
	})
	var v any
	var err error
	select {
	case res := <-ch:
		v, err = res.Val, res.Err
	case <-ctx.Done():
		err = fmt.Errorf("waiting for the live list of the LimitRanges of namespace %s: %w", ns, context.Cause(ctx))
	}
	if err != nil {
		l.log.Error(err, "listing the LimitRanges from the API server (the cache has none): judging the pod without them", "namespace", ns)
		return cached.Items, nil
	}
	return v.([]corev1.LimitRange), nil
}

// store keeps ns's live answer, making room by dropping the expired entries, then, if the table is
// still full, the one that expires first.
func (l *limitRangeLookup) store(ns string, items []corev1.LimitRange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lists++
	now := l.now()
	if _, ok := l.entries[ns]; !ok && len(l.entries) >= limitRangeLiveEntries {
		first := ""
		for k, e := range l.entries {
			if !now.Before(e.expiry) {
				delete(l.entries, k)
			} else if first == "" || e.expiry.Before(l.entries[first].expiry) {
				first = k
			}
		}
		if len(l.entries) >= limitRangeLiveEntries {
			delete(l.entries, first)
		}
	}
	l.entries[ns] = liveLimitRanges{expiry: now.Add(limitRangeLiveTTL), items: items}
}
