package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/kubeobj"
)

// createSample creates a config/samples scenario in namespace ns: the workloads first, then,
// once the manager's cache holds all of them, the policies. Waiting for the cache makes the
// policy's first reconcile see the whole graph, so the events a test expects are exact.
func createSample(ctx context.Context, file, ns string) {
	objs := sampleObjects(file, ns)
	workloads := 0
	for _, o := range objs {
		if o.GetKind() == "RetryPolicy" {
			continue
		}
		Expect(k8sClient.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetKind(), o.GetName())
		if o.GetKind() != "Namespace" {
			workloads++
		}
	}
	waitForCachedWorkloads(ctx, ns, workloads)
	for _, o := range objs {
		if o.GetKind() == "RetryPolicy" {
			Expect(k8sClient.Create(ctx, o)).To(Succeed(), "creating RetryPolicy %s", o.GetName())
		}
	}
}

func waitForCachedWorkloads(_ context.Context, ns string, n int) {
	// The index the reconciler reads (fed by the manager's cache, which holds workloads as
	// kubeobj.CachedWorkload, not as typed objects a cached client could get).
	Eventually(func() int {
		return reconciler.Index.Len(ns)
	}).Should(Equal(n), "workloads of namespace %s in the manager's workload index", ns)
}

func createNamespace(ctx context.Context, ns string) {
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
}

// deployment is a minimal Deployment whose pod template has the labels and upstreams given.
func deployment(ns, name, upstreams string, lbls map[string]string) *appsv1.Deployment {
	tl := map[string]string{"app.kubernetes.io/name": name}
	for k, v := range lbls {
		tl[k] = v
	}
	ann := map[string]string{}
	if upstreams != "" {
		ann[annotations.Upstreams] = upstreams
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tl, Annotations: ann},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
			},
		},
	}
}

func policy(ns, name string, cap int32, sel *metav1.LabelSelector, eps ...v1alpha1.Entrypoint) *v1alpha1.RetryPolicy {
	return &v1alpha1.RetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.RetryPolicySpec{MaxAmplification: cap, Selector: sel, Entrypoints: eps},
	}
}

// updateDeployment changes a Deployment read fresh from the API server, retrying on conflict.
func updateDeployment(ctx context.Context, ns, name string, change func(*appsv1.Deployment)) {
	Eventually(func() error {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		change(&d)
		return k8sClient.Update(ctx, &d)
	}).Should(Succeed())
}

func setUpstreams(ctx context.Context, ns, name, value string) {
	updateDeployment(ctx, ns, name, func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations[annotations.Upstreams] = value
	})
}

// statusOf reads a policy's status from the API server (not the cache).
func statusOf(ctx context.Context, ns, name string) func() (v1alpha1.RetryPolicyStatus, error) {
	return func() (v1alpha1.RetryPolicyStatus, error) {
		var p v1alpha1.RetryPolicy
		err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &p)
		return p.Status, err
	}
}

// verdict is the part of a status the tests compare: numbers and both conditions without
// their timestamps.
type verdict struct {
	Amplification     int64
	WorstPath         string
	Ready, ReadyWhy   string
	Within, WithinWhy string
	WithinMessage     string
}

func verdictOf(st v1alpha1.RetryPolicyStatus) verdict {
	v := verdict{Amplification: st.Amplification, WorstPath: st.WorstPath}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
		v.Ready, v.ReadyWhy = string(c.Status), c.Reason
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWithinCap); c != nil {
		v.Within, v.WithinWhy, v.WithinMessage = string(c.Status), c.Reason, c.Message
	}
	return v
}

func verdictOfPolicy(ctx context.Context, ns, name string) func() (verdict, error) {
	return func() (verdict, error) {
		st, err := statusOf(ctx, ns, name)()
		return verdictOf(st), err
	}
}

// recordedEvent is an events.k8s.io/v1 Event about a policy, as the tests compare it.
type recordedEvent struct {
	Type, Reason, Action, Note, Controller string
}

// eventsAbout lists the events.k8s.io/v1 Events regarding a policy, oldest first.
func eventsAbout(ctx context.Context, ns, name string) func() ([]recordedEvent, error) {
	return func() ([]recordedEvent, error) {
		var list eventsv1.EventList
		if err := k8sClient.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
		var out []recordedEvent
		for _, e := range list.Items {
			if e.Regarding.Kind == "RetryPolicy" && e.Regarding.Name == name {
				out = append(out, recordedEvent{e.Type, e.Reason, e.Action, e.Note, e.ReportingController})
			}
		}
		return out, nil
	}
}

// gauge reads a gauge of the manager's metrics registry (what /metrics serves); an absent
// series is an error.
func gauge(name, ns, policy string) (float64, error) {
	v, ok, err := series(name, ns, policy)
	if err == nil && !ok {
		err = fmt.Errorf("no series %s{namespace=%q,policy=%q}", name, ns, policy)
	}
	return v, err
}

// hasSeries reports whether the registry has the series.
func hasSeries(name, ns, policy string) (bool, error) {
	_, ok, err := series(name, ns, policy)
	return ok, err
}

func series(name, ns, policy string) (value float64, ok bool, err error) {
	fams, err := metrics.Registry.Gather()
	if err != nil {
		return 0, false, fmt.Errorf("gathering metrics: %w", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["policy"] == policy {
				return m.GetGauge().GetValue(), true, nil
			}
		}
	}
	return 0, false, nil
}

// scrapeMetrics fetches the manager's /metrics over HTTP, as Prometheus does.
func scrapeMetrics() (string, error) {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(body), nil
}

// fedIndex is a workload index fed from mgr's cache, as the operator makes the one it shares.
func fedIndex(mgr ctrl.Manager) *index.Index {
	x := index.New()
	Expect(kubeobj.FeedIndex(context.Background(), mgr.GetCache(), x)).To(Succeed())
	return x
}
