package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// admissionBody is an AdmissionReview of uid for an object padded to about size bytes.
func admissionBody(t *testing.T, uid string, size int) []byte {
	t.Helper()
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"shop"},"data":{"pad":%q}}`, strings.Repeat("x", max(size-200, 0)))
	review := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{"uid": uid, "operation": "CREATE", "namespace": "shop", "name": "c",
			"kind": map[string]string{"group": "", "version": "v1", "kind": "ConfigMap"}, "object": json.RawMessage(obj)},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestBodyBudgetBoundsRequestsInFlight: over real HTTP on loopback, through controller-runtime's
// admission webhook, the requests judged at once never hold more than the budget of body bytes
// (before, as many large objects as were sent were decoded together: a 2 MB VirtualService
// allocates 216 MB to judge under Rewrite); one larger than the budget is judged alone; one
// whose caller gives up while it waits is never judged; a body over controller-runtime's 7 MiB is
// refused with its message.
func TestBodyBudgetBoundsRequestsInFlight(t *testing.T) {
	g := NewWithT(t)
	const budget = 100_000
	b := newBodyBudget(budget)
	var inFlight, peak, judged atomic.Int64
	release := map[string]chan struct{}{}
	var mu sync.Mutex
	gate := func(uid string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if release[uid] == nil {
			release[uid] = make(chan struct{})
		}
		return release[uid]
	}
	sizes := sync.Map{}
	handler := admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		n, _ := sizes.Load(string(req.UID))
		now := inFlight.Add(n.(int64))
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		judged.Add(1)
		<-gate(string(req.UID))
		inFlight.Add(-n.(int64))
		return admission.Allowed("")
	})
	srv := httptest.NewServer(b.wrap(&admission.Webhook{Handler: handler}))
	defer srv.Close()

	type result struct {
		code int
		body string
		err  error
	}
	send := func(query, uid string, size int) chan result {
		body := admissionBody(t, uid, size)
		sizes.Store(uid, int64(len(body)))
		out := make(chan result, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+query, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- result{err: err}
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			out <- result{code: resp.StatusCode, body: string(raw)}
		}()
		return out
	}
	allowed := func(r result) {
		t.Helper()
		g.Expect(r.err).NotTo(HaveOccurred())
		g.Expect(r.code).To(Equal(http.StatusOK))
		g.Expect(r.body).To(ContainSubstring(`"allowed":true`))
	}
	eventually := func(f func() int64, want int64) {
		t.Helper()
		g.Eventually(f).WithTimeout(10 * time.Second).WithPolling(2 * time.Millisecond).Should(Equal(want))
	}

	// 60 KB in; another 60 KB waits (120 KB > 100 KB); a 1 KB one queues behind it (FIFO).
	a := send("", "a", 60_000)
	eventually(judged.Load, 1)
	bRes := send("", "b", 60_000)
	eventually(b.waiting.Load, 1)
	c := send("", "c", 1_000)
	eventually(b.waiting.Load, 2)
	g.Expect(judged.Load()).To(Equal(int64(1)))
	close(gate("a"))
	allowed(<-a)
	eventually(judged.Load, 3) // b and c together: 61 KB
	g.Expect(b.waiting.Load()).To(Equal(int64(0)))

	// Larger than the budget: waits for all of it, judged alone.
	big := send("", "big", 300_000)
	eventually(b.waiting.Load, 1)
	close(gate("b"))
	allowed(<-bRes)
	g.Expect(judged.Load()).To(Equal(int64(3)))
	close(gate("c"))
	allowed(<-c)
	eventually(judged.Load, 4)

	// Waits longer than the API server's timeout for the call: never judged, refused with why.
	gone := <-send("?timeout=50ms", "gone", 50_000)
	g.Expect(gone.err).NotTo(HaveOccurred())
	g.Expect(gone.code).To(Equal(http.StatusServiceUnavailable))
	goneSize, _ := sizes.Load("gone")
	g.Expect(gone.body).To(Equal(fmt.Sprintf("retrycap webhook: a request of %d bytes not judged: it waited 50ms for its share of the 100000 bytes of admission requests judged at once\n", goneSize)))
	g.Expect(b.waiting.Load()).To(Equal(int64(0)))
	g.Expect(judged.Load()).To(Equal(int64(4)))
	close(gate("big"))
	allowed(<-big)

	// The budget is whole again: 99 KB judged at once.
	d := send("", "d", 99_000)
	eventually(judged.Load, 5)
	close(gate("d"))
	allowed(<-d)
	// The most judged at once: the one larger than the budget, alone.
	bigSize, _ := sizes.Load("big")
	g.Expect(peak.Load()).To(Equal(bigSize.(int64)))

	// Over controller-runtime's 7 MiB: refused, its message, never judged.
	over := send("", "over", 7<<20+1000)
	r := <-over
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.body).To(ContainSubstring(`request entity is too large; limit is 7340032 bytes`))
	g.Expect(judged.Load()).To(Equal(int64(5)))
}
