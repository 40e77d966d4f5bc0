package index

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// chainIndex is gateway -x3-> order -x{attempts}-> payment in namespace shop.
func chainIndex(attempts int) *Index {
	x := New()
	x.Put(workloadtest.Deployment("gateway", "order=3"))
	x.Put(workloadtest.Deployment("order", fmt.Sprintf("payment=%d", attempts)))
	x.Put(workloadtest.Deployment("payment", ""))
	return x
}

// fresh reports whether p's prepared graph of ns is built for the namespace's current
// generation, without building it.
func (x *Index) fresh(ns string, p *v1alpha1.RetryPolicy) bool {
	x.mu.RLock()
	var pb *preparedBase
	var gen uint64
	if n := x.byNS[ns]; n != nil {
		pb, gen = n.bases[p.Namespace+"/"+p.Name], n.gen
	}
	x.mu.RUnlock()
	if pb == nil {
		return false
	}
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return pb.base != nil && pb.gen == gen && pb.policy != nil && pb.policyGen == pb.policy.Generation
}

func judgeAuth(t *testing.T, b *workload.Base, incoming workload.Workload) string {
	t.Helper()
	j, _, ok := b.Judge(workload.Parse(incoming))
	if !ok {
		t.Fatalf("the prepared graph declined %s", incoming)
	}
	return j.Explain()
}

func TestBaseFollowsTheNamespaceAndThePolicy(t *testing.T) {
	x := chainIndex(1)
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "gateway", ClientAttempts: 1}}
	p.Generation = 1
	incoming := workloadtest.Deployment("payment", "ledger=2")

	b1 := x.Base("shop", p)
	if b2 := x.Base("shop", p); b2 != b1 {
		t.Fatalf("an unchanged namespace and policy built the graph again")
	}
	if got, want := judgeAuth(t, b1, incoming), "gateway -x3-> order -x1-> payment -x2-> ledger = 6 > cap 4"; got != want {
		t.Fatalf("judged %q, want %q", got, want)
	}
	// A change to a workload: the next request sees it.
	x.Put(workloadtest.Deployment("order", "payment=2"))
	b3 := x.Base("shop", p)
	if b3 == b1 {
		t.Fatalf("a changed namespace kept the old graph")
	}
	if got, want := judgeAuth(t, b3, incoming), "gateway -x3-> order -x2-> payment -x2-> ledger = 12 > cap 4"; got != want {
		t.Fatalf("after the change judged %q, want %q", got, want)
	}
	// A change to the policy's spec (a new generation): built again for it.
	p2 := p.DeepCopy()
	p2.Spec.MaxAmplification = 20
	p2.Generation = 2
	b4 := x.Base("shop", p2)
	if b4 == b3 {
		t.Fatalf("a new policy generation kept the old graph")
	}
	if j, _, _ := b4.Judge(workload.Parse(incoming)); j.Over || j.Amplification != 12 {
		t.Fatalf("under cap 20: %+v", j)
	}
	// A namespace without workloads has none.
	if b := x.Base("other", p); b != nil {
		t.Fatalf("Base of an empty namespace = %v", b)
	}
}

func TestRefreshRebuildsStaleBasesInTheBackground(t *testing.T) {
	g := NewWithT(t)
	x := chainIndex(1)
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Refresh(ctx) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()

	x.Base("shop", p)
	g.Expect(x.fresh("shop", p)).To(BeTrue())
	x.Put(workloadtest.Deployment("order", "payment=2"))
	// Rebuilt by refresh, without a request (TestRefreshDropsBasesNoRequestUses checks that a
	// change makes the graph stale).
	g.Eventually(func() bool { return x.fresh("shop", p) }, 5*time.Second, 10*time.Millisecond).Should(BeTrue())
	if got, want := judgeAuth(t, x.Base("shop", p), workloadtest.Deployment("payment", "ledger=2")), "gateway -x3-> order -x2-> payment -x2-> ledger = 12 > cap 4"; got != want {
		t.Fatalf("after refresh judged %q, want %q", got, want)
	}
}

func TestRefreshDropsBasesNoRequestUses(t *testing.T) {
	x := chainIndex(1)
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	x.Base("shop", p)
	x.Put(workloadtest.Deployment("order", "payment=2"))
	if x.fresh("shop", p) {
		t.Fatalf("a change left the graph fresh")
	}
	// Within the idle time: rebuilt.
	x.refreshOnce(time.Now())
	if !x.fresh("shop", p) {
		t.Fatalf("a used graph was not rebuilt")
	}
	x.Put(workloadtest.Deployment("order", "payment=3"))
	// Past it (the policy was deleted, say): dropped, not rebuilt.
	x.refreshOnce(time.Now().Add(defaultBaseIdle + time.Minute))
	x.mu.RLock()
	left := len(x.byNS["shop"].bases)
	x.mu.RUnlock()
	if left != 0 {
		t.Fatalf("%d idle prepared graphs kept", left)
	}
}

// Requests judged against the prepared graph while informer events change the namespace and
// refresh rebuilds it: every verdict is one of the two the namespace's states give. (Run with
// -race to check the locking; `go test -race -run TestBaseConcurrent ./internal/webhook`.)
func TestBaseConcurrentRequestsAndChanges(t *testing.T) {
	x := chainIndex(1)
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "gateway", ClientAttempts: 1}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = x.Refresh(ctx) }()
	incoming := workloadtest.Deployment("payment", "ledger=2")
	want := map[string]bool{
		"gateway -x3-> order -x1-> payment -x2-> ledger = 6 > cap 4":  true,
		"gateway -x3-> order -x2-> payment -x2-> ledger = 12 > cap 4": true,
	}
	errs := make(chan string, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				j, _, ok := x.Base("shop", p).Judge(workload.Parse(incoming))
				if !ok || !want[j.Explain()] {
					errs <- fmt.Sprintf("judged %q (answered %v)", j.Explain(), ok)
					return
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		x.Put(workloadtest.Deployment("order", fmt.Sprintf("payment=%d", 1+i%2)))
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func TestRefreshFollowsPolicyChanges(t *testing.T) {
	x := chainIndex(2)
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "gateway", ClientAttempts: 1}}
	p.Generation = 1
	x.Base("shop", p)
	// The cap raised: stale until refresh rebuilds it for the new generation, without a request.
	p2 := p.DeepCopy()
	p2.Spec.MaxAmplification = 20
	p2.Generation = 2
	x.PolicyChanged(p2, false)
	if x.fresh("shop", p2) {
		t.Fatalf("a new policy generation left the graph fresh")
	}
	x.refreshOnce(time.Now())
	if !x.fresh("shop", p2) {
		t.Fatalf("refresh did not rebuild for the new generation")
	}
	if j, _, _ := x.Base("shop", p2).Judge(workload.Parse(workloadtest.Deployment("payment", "ledger=2"))); j.Over || j.Amplification != 12 {
		t.Fatalf("under cap 20: %+v", j)
	}
	// A metadata-only update (same generation) changes nothing; a deleted policy's graph goes.
	x.PolicyChanged(p2, false)
	if !x.fresh("shop", p2) {
		t.Fatalf("an update without a new generation made the graph stale")
	}
	x.PolicyChanged(p2, true)
	x.mu.RLock()
	left := len(x.byNS["shop"].bases)
	x.mu.RUnlock()
	if left != 0 {
		t.Fatalf("a deleted policy's graph was kept")
	}
}
