package workloadtest

import (
	"fmt"
	"math/rand/v2"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// Policy is a RetryPolicy shop/name with cap and mode, one try by default, the entry gateway
// called once, selecting labels (every workload of the namespace when nil).
func Policy(name string, cap int32, mode v1alpha1.Enforcement, labels map[string]string) *v1alpha1.RetryPolicy {
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	p.Spec.MaxAmplification = cap
	p.Spec.Enforcement = mode
	p.Spec.Retry.DefaultAttempts = 1
	if labels != nil {
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	}
	p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "gateway", ClientAttempts: 1}}
	return p
}

// Deployment is a Deployment shop/name labelled part of the shop, declaring upstreams
// (retrycap.dev/upstreams) unless empty.
func Deployment(name, upstreams string) workload.Workload {
	w := workload.Workload{Kind: workload.KindDeployment, Namespace: "shop", Name: name,
		Labels:      workload.PairsOf(map[string]string{"app.kubernetes.io/part-of": "shop"}),
		Annotations: workload.PairsOf(map[string]string{})}
	if upstreams != "" {
		w.Annotations = w.Annotations.With(annotations.Upstreams, upstreams)
	}
	return w
}

// RandomWorkloads is n workloads over fewer services (so some share one), calling random
// services (some outside the namespace, some cycles unless acyclic), some labelled for a
// selector. Without cycles when acyclic (a service calls only services numbered above its own).
// The same r gives the same workloads: the tests' seeds name their cases.
func RandomWorkloads(r *rand.Rand, n int, acyclic bool) []workload.Workload {
	svcs := n*2/3 + 1
	var ws []workload.Workload
	for i := 0; i < n; i++ {
		var ups []string
		used := map[int]bool{}
		own := r.IntN(svcs)
		for k := r.IntN(3); k > 0; k-- {
			t := r.IntN(svcs + 2)
			if acyclic && t <= own {
				continue
			}
			if used[t] {
				continue
			}
			used[t] = true
			name := fmt.Sprintf("s%d", t)
			if t >= svcs {
				name = fmt.Sprintf("ext%d.example.com", t)
			}
			ups = append(ups, fmt.Sprintf("%s=%d", name, 1+r.IntN(3)))
		}
		w := Deployment(fmt.Sprintf("w%d", i), strings.Join(ups, ", "))
		w.Annotations = w.Annotations.With(annotations.Service, fmt.Sprintf("s%d", own))
		if r.IntN(3) == 0 {
			w.Labels = w.Labels.With("tier", "edge")
		}
		ws = append(ws, w)
	}
	return ws
}

// WithRandomServices labels ws into groups (app=g0..g5), makes some call Services by name
// (svc0..svc3), and returns Services over the groups: some named like a workload's service
// name (s0..), some not (svc0..), some without a selector, some ExternalName.
func WithRandomServices(r *rand.Rand, ws []workload.Workload) []workload.Service {
	for i := range ws {
		ws[i].Labels = ws[i].Labels.With("app", fmt.Sprintf("g%d", r.IntN(6)))
		if r.IntN(3) == 0 {
			up := fmt.Sprintf("svc%d=%d", r.IntN(4), 1+r.IntN(3))
			if v := ws[i].Annotations.Get(annotations.Upstreams); v != "" && !strings.Contains(v, up[:4]) {
				up = v + ", " + up
			}
			ws[i].Annotations = ws[i].Annotations.With(annotations.Upstreams, up)
		}
	}
	var svcs []workload.Service
	for k := r.IntN(7); k > 0; k-- {
		s := workload.Service{Namespace: "shop", Name: fmt.Sprintf("svc%d", r.IntN(4)), Selector: map[string]string{"app": fmt.Sprintf("g%d", r.IntN(6))}}
		if r.IntN(3) == 0 {
			s.Name = fmt.Sprintf("s%d", r.IntN(8))
		}
		switch r.IntN(6) {
		case 0:
			s.Selector = nil
		case 1:
			s.ExternalName = true
		}
		svcs = append(svcs, s)
	}
	return svcs
}
