package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// Counts is how often the reconciler ran for one policy and how many status patches it sent
// that the API server accepted. They let tests assert that nothing is written when nothing
// changed.
type Counts struct {
	Reconciles   int
	StatusWrites int
}

// countingClient is the reconciler's client with counts per policy, kept in the tests so that
// the production reconciler holds no test-only state. Reconcile gets its RetryPolicy exactly once,
// first thing, so a Get of a RetryPolicy counts one reconcile; an accepted status patch counts one
// write.
type countingClient struct {
	client.Client

	mu     sync.Mutex
	counts map[types.NamespacedName]Counts
}

func newCountingClient(c client.Client) *countingClient {
	return &countingClient{Client: c, counts: map[types.NamespacedName]Counts{}}
}

// Counts returns the counts for one policy.
func (c *countingClient) Counts(key types.NamespacedName) Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

func (c *countingClient) count(key types.NamespacedName, f func(*Counts)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.counts[key]
	f(&n)
	c.counts[key] = n
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.RetryPolicy); ok {
		c.count(key, func(n *Counts) { n.Reconciles++ })
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type countingStatus struct {
	client.SubResourceWriter
	c *countingClient
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	// Counted before it is sent: the API server shows the write before the call returns, so a
	// test that saw the new status must already see it counted. A refused patch is taken back.
	key := client.ObjectKeyFromObject(obj)
	s.c.count(key, func(n *Counts) { n.StatusWrites++ })
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if err != nil {
		s.c.count(key, func(n *Counts) { n.StatusWrites-- })
	}
	return err
}
