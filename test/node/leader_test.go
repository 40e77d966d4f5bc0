package node

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// The manager's lease timings (internal/operator's defaults, which the chart keeps) and the
// failover time docs/helm.md documents from them: a replica that stops releases the lease, a
// crashed one's lease expires after leaseDuration; either way the next leader takes it on its
// next try, retryPeriod later at most.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
	failoverBound = leaseDuration + retryPeriod
)

// admissionLoop creates the over-cap order with a server-side dry run, again and again, and
// counts the gate's exact refusals (the webhook answered) against everything else.
type admissionLoop struct {
	mu       sync.Mutex
	answered int
	other    map[string]int
	stop     chan struct{}
	done     chan struct{}
}

func startAdmissionLoop(cs kubernetes.Interface, d *appsv1.Deployment, want string) *admissionLoop {
	l := &admissionLoop{other: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	// Paced, not a busy loop: four callers, each 10 a second, so that the API server keeps
	// several connections to the webhooks in use (a request on one that a leaving replica
	// closes is what fails), and the node's two cores stay with the failover being measured.
	var wg sync.WaitGroup
	for range admissionCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.call(cs, d, want)
		}()
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l
}

// admissionCallers call the gate at once, each every admissionPeriod.
const (
	admissionCallers = 4
	admissionPeriod  = 100 * time.Millisecond
)

func (l *admissionLoop) call(cs kubernetes.Interface, d *appsv1.Deployment, want string) {
	tick := time.NewTicker(admissionPeriod)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		cancel()
		l.mu.Lock()
		switch {
		case err == nil:
			l.other["admitted (the gate did not refuse)"]++
		case err.Error() == want:
			l.answered++
		default:
			l.other[err.Error()]++
		}
		l.mu.Unlock()
	}
}

func (l *admissionLoop) counts() (answered int, other []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for why, n := range l.other {
		other = append(other, fmt.Sprintf("%d x %s", n, why))
	}
	sort.Strings(other)
	return l.answered, other
}

func (l *admissionLoop) finish() (int, []string) {
	close(l.stop)
	<-l.done
	return l.counts()
}

// leaseHolder is the pod holding the manager's lease (its identity is "<pod>_<uuid>").
func (h *harness) leaseHolder(t *testing.T) string {
	t.Helper()
	r := h.k("", "get", "lease", leaseName, "-n", systemNS, "-o", "jsonpath={.spec.holderIdentity}")
	if r.err != nil {
		t.Fatalf("the lease: %s", r)
	}
	pod, _, _ := strings.Cut(strings.TrimSpace(r.stdout), "_")
	return pod
}

// testLeaderFailover: the leader's pod is deleted while admission requests keep coming: every
// one is answered (the other replica serves the webhooks, and the leaving one until its
// endpoint is gone), and the other replica takes the lease and writes a policy's status within
// the documented failover time.
func testLeaderFailover(t *testing.T, h *harness) {
	cfg, err := clientcmd.BuildConfigFromFlags("", h.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's default limit (5 a second) would pace the callers instead of admissionPeriod.
	cfg.QPS, cfg.Burst = 100, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(orderFile(t, "3"))
	if err != nil {
		t.Fatal(err)
	}
	var order appsv1.Deployment
	if err := yaml.UnmarshalStrict(doc, &order); err != nil {
		t.Fatalf("order: %v", err)
	}
	want := `admission webhook "gate.retrycap.dev" denied the request: RetryPolicy ` + gateNS +
		"/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1"
	leader := h.leaseHolder(t)
	managers := h.podNames(t, systemNS, "retrycap")
	if len(managers) != 2 {
		t.Fatalf("manager pods %v, want 2", managers)
	}
	loop := startAdmissionLoop(cs, &order, want)
	eventually(t, time.Minute, "the gate answers the dry-run loop", func() error {
		if n, other := loop.counts(); n < 5 || len(other) > 0 {
			return fmt.Errorf("%d refusals, other answers %v", n, other)
		}
		return nil
	})
	before, _ := loop.counts()
	deleted := time.Now()
	h.mustK(t, "", "delete", "pod", leader, "-n", systemNS, "--wait=false")
	var newLeader string
	eventually(t, time.Minute, "another replica holds the lease", func() error {
		newLeader = h.leaseHolder(t)
		if newLeader == leader || newLeader == "" {
			return fmt.Errorf("holder %q", newLeader)
		}
		return nil
	})
	tookLease := time.Since(deleted)
	// A spec change now can only be reconciled by the new leader.
	gen := h.bumpCap(t, "shop", "checkout")
	eventually(t, time.Minute, fmt.Sprintf("shop/checkout's status.observedGeneration = %d, written by %s", gen, newLeader), func() error {
		r := h.k("", "get", "retrypolicy", "checkout", "-n", "shop", "-o", "jsonpath={.status.observedGeneration}")
		if r.err != nil {
			return fmt.Errorf("%s", r)
		}
		if got := strings.TrimSpace(r.stdout); got != strconv.FormatInt(gen, 10) {
			return fmt.Errorf("observedGeneration %q", got)
		}
		return nil
	})
	wrote := time.Since(deleted)
	// Admission keeps being checked until the replacement replica serves too.
	eventually(t, 3*time.Minute, "two manager replicas ready again", func() error {
		r := h.k("", "get", "deployment", "-n", systemNS, "-l", "app.kubernetes.io/name=retrycap", "-o", "jsonpath={.items[*].status.readyReplicas}")
		if got := strings.TrimSpace(r.stdout); got != "2" {
			return fmt.Errorf("readyReplicas %q", got)
		}
		if names := h.podNames(t, systemNS, "retrycap"); len(names) != 2 {
			return fmt.Errorf("pods %v", names)
		}
		return nil
	})
	answered, other := loop.finish()
	t.Logf("leader %s deleted: %s took the lease after %.1fs, the policy's status written after %.1fs (documented bound %s); admission: %d refusals before the deletion, %d in all, other answers: %v",
		leader, newLeader, tookLease.Seconds(), wrote.Seconds(), failoverBound, before, answered, other)
	if len(other) > 0 {
		t.Errorf("admission did not answer throughout: %d refusals, and %s", answered, strings.Join(other, "; "))
	}
	if answered-before < 40 {
		t.Errorf("only %d dry-run creates answered after the deletion: the failover was not under load", answered-before)
	}
	if tookLease > failoverBound {
		t.Errorf("the lease changed hands %.1fs after the leader's pod was deleted: over the documented %s", tookLease.Seconds(), failoverBound)
	}
	if wrote > failoverBound {
		t.Errorf("the new leader wrote the status %.1fs after the leader's pod was deleted: over the documented %s", wrote.Seconds(), failoverBound)
	}
}

// bumpCap raises a RetryPolicy's maxAmplification by one and returns its new generation.
func (h *harness) bumpCap(t *testing.T, ns, name string) int64 {
	t.Helper()
	cur := strings.TrimSpace(h.mustK(t, "", "get", "retrypolicy", name, "-n", ns, "-o", "jsonpath={.spec.maxAmplification}"))
	n, err := strconv.Atoi(cur)
	if err != nil {
		t.Fatalf("%s/%s spec.maxAmplification %q", ns, name, cur)
	}
	h.mustK(t, "", "patch", "retrypolicy", name, "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"maxAmplification":%d}}`, n+1))
	g := strings.TrimSpace(h.mustK(t, "", "get", "retrypolicy", name, "-n", ns, "-o", "jsonpath={.metadata.generation}"))
	gen, err := strconv.ParseInt(g, 10, 64)
	if err != nil {
		t.Fatalf("%s/%s generation %q", ns, name, g)
	}
	return gen
}
