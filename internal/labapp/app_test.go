package labapp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

func get(t *testing.T, url string, hdr map[string]string, method string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestLeafAndChain(t *testing.T) {
	leaf, err := Start(Config{Name: "payment"})
	if err != nil {
		t.Fatal(err)
	}
	defer leaf.Close()
	// No proxy: the mid app calls the leaf directly, propagating the budget.
	mid, err := Start(Config{Name: "order", Upstreams: []string{leaf.URL() + "/charge"}, Propagation: PropagateBaggage})
	if err != nil {
		t.Fatal(err)
	}
	defer mid.Close()
	if c := get(t, mid.URL(), map[string]string{"Retrycap-Budget": "3"}, "GET"); c != 200 {
		t.Fatalf("status %d", c)
	}
	leaf.SetFailing(true)
	if c := get(t, mid.URL(), nil, "GET"); c != http.StatusBadGateway {
		t.Fatalf("failing leaf: mid answered %d", c)
	}
	get(t, leaf.URL()+"/_labapp/fail?on=0", nil, "GET")
	get(t, leaf.URL(), map[string]string{"Idempotency-Key": "k"}, "POST")
	get(t, leaf.URL(), map[string]string{"Idempotency-Key": "k"}, "POST")
	s := leaf.Stats()
	if s.Received != 4 || s.OK != 3 || s.Failed != 1 || s.MaxBudgetSeen != 3 || s.Budgeted != 1 || s.Posts != 2 || s.DuplicatePost != 1 {
		t.Fatalf("stats %+v", s)
	}
	leaf.ResetStats()
	if leaf.Received() != 0 {
		t.Fatal("reset")
	}
}

func TestCapacity(t *testing.T) {
	blocker, err := Start(Config{Name: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	app, err := Start(Config{Name: "capped", Capacity: 1, Upstreams: []string{blocker.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	// Occupy the only slot as an in-flight request would.
	app.inflight.Add(1)
	if c := get(t, app.URL(), nil, "GET"); c != 503 {
		t.Fatalf("over capacity: %d", c)
	}
	app.inflight.Add(-1)
	if c := get(t, app.URL(), nil, "GET"); c != 200 {
		t.Fatalf("under capacity: %d", c)
	}
	if s := app.Stats(); s.Rejected != 1 || s.Received != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestKeepCallsWhenCallerGone: a caller hangs up while the app's call is under way. By default
// the call ends with the inbound request (its upstream sees the cancellation); with
// KeepCallsWhenCallerGone it runs on to its answer, as the storm lab's apps need to show work
// going on below a user who gave up.
func TestKeepCallsWhenCallerGone(t *testing.T) {
	for _, keep := range []bool{false, true} {
		arrived := make(chan struct{}, 1)
		release := make(chan struct{})
		ended := make(chan string, 1)
		up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
				ended <- "cancelled"
			case <-release:
				ended <- "answered"
				_, _ = io.WriteString(w, "ok\n")
			}
		})}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = up.Serve(ln) }()
		app, err := Start(Config{Name: "order", Upstreams: []string{"http://" + ln.Addr().String() + "/charge"}, KeepCallsWhenCallerGone: keep})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, app.URL(), nil)
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		<-arrived
		cancel() // the caller hangs up
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("keep %v: caller's request ended with %v, want context.Canceled", keep, err)
		}
		if keep {
			close(release) // the upstream answers only now: the call was still waiting for it
		}
		want := map[bool]string{false: "cancelled", true: "answered"}[keep]
		if got := <-ended; got != want {
			t.Errorf("keep %v: the upstream's request was %s, want %s", keep, got, want)
		}
		if !keep {
			close(release)
		}
		_ = app.Close()
		_ = up.Close()
	}
}
