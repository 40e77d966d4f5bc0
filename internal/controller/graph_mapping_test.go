package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/telemetry"
	"github.com/retrycap/retrycap/internal/workload"
)

// TestNodeMappers: observed callers land on the policy's service nodes (a workload by its name
// and, when the data says it, kind; a service by its node), callees as the graph names them; a
// RetryPolicy names other namespaces "name.ns", a cluster policy every node.
func TestNodeMappers(t *testing.T) {
	web := workload.Workload{Kind: "Deployment", Namespace: "shop", Name: "web-v2"}
	db := workload.Workload{Kind: "StatefulSet", Namespace: "shop", Name: "db"}
	for _, tc := range []struct {
		cluster   bool
		serviceOf map[string]string
		want      string
	}{
		{false, map[string]string{web.Key(): "web", db.Key(): "db"},
			"web/true web/true /false web/true /false db/true /false | cart/true bank.billing/true /false"},
		{true, map[string]string{web.Key(): "web.shop", db.Key(): "db.shop"},
			"web.shop/true web.shop/true /false web.shop/true /false db.shop/true /false | cart.shop/true bank.billing/true /false"},
	} {
		pol := workload.ForRetryPolicy(&v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"}})
		if tc.cluster {
			pol = workload.ForClusterRetryPolicy(&v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, workload.NewClusterScopeOf("shop", "billing"))
		}
		res := &workload.Result{Policy: pol, Selected: []workload.Workload{db, web}, ServiceOf: tc.serviceOf}
		caller, callee := nodeMappers(res)
		var got string
		for _, c := range []telemetry.Caller{
			{Namespace: "shop", Name: "web-v2"},                     // Istio: the workload
			{Namespace: "shop", Name: "web-v2", Kind: "deployment"}, // Linkerd: with its kind
			{Namespace: "shop", Name: "web-v2", Kind: "daemonset"},  // another kind
			{Namespace: "shop", Name: "web", Service: true},         // OTel, proxies: a service
			{Namespace: "shop", Name: "nobody", Service: true},      // not a selected service
			{Namespace: "shop", Name: "db", Kind: "statefulset"},
			{Namespace: "other", Name: "web-v2"}, // not the policy's
		} {
			n, ok := caller(c)
			got += fmt.Sprintf("%s/%v ", n, ok)
		}
		got += "|"
		for _, c := range []telemetry.Callee{{Namespace: "shop", Name: "cart"}, {Namespace: "billing", Name: "bank"}, {Name: "api.example.com"}} {
			n, ok := callee(c)
			got += fmt.Sprintf(" %s/%v", n, ok)
		}
		if got != tc.want {
			t.Errorf("cluster=%v\n got %s\nwant %s", tc.cluster, got, tc.want)
		}
	}
}
