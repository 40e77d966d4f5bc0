package inject

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// A pod whose workload a Service fronts is an entrypoint when the Service's node is one:
// emojivoto's vote-bot calls Service web-svc, which fronts Deployment web.
func TestIsEntrypointThroughServices(t *testing.T) {
	dep := func(name, app, ups string) workload.Workload {
		return workload.Workload{Kind: workload.KindDeployment, Namespace: "emojivoto", Name: name,
			Labels: workload.PairsOf(map[string]string{"app": app}), Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: ups})}
	}
	ws := []workload.Workload{dep("vote-bot", "vote-bot", "web-svc=3"), dep("web", "web-svc", "emoji-svc=3"), dep("emoji", "emoji-svc", "")}
	svcs := []workload.Service{
		{Namespace: "emojivoto", Name: "web-svc", Selector: map[string]string{"app": "web-svc"}},
		{Namespace: "emojivoto", Name: "emoji-svc", Selector: map[string]string{"app": "emoji-svc"}},
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "emojivoto", Name: "p"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 9}}
	tests := []struct {
		w    workload.Workload
		svcs []workload.Service
		want bool
		why  string
	}{
		{ws[0], svcs, true, "nothing calls vote-bot"},
		{ws[1], svcs, false, "vote-bot calls web-svc, which fronts web"},
		{ws[1], nil, true, "without the Service, web's own name is called by nobody"},
		{ws[2], svcs, false, "web-svc calls emoji-svc"},
	}
	for _, tt := range tests {
		if got := IsEntrypoint(workload.ForRetryPolicy(p), ws, tt.w, tt.svcs...); got != tt.want {
			t.Errorf("%s with %d Services: entrypoint %v, want %v (%s)", tt.w, len(tt.svcs), got, tt.want, tt.why)
		}
	}
	// A Service named as an entrypoint makes the workloads behind it entrypoints.
	p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "web-svc"}}
	if !IsEntrypoint(workload.ForRetryPolicy(p), ws, ws[1], svcs...) || IsEntrypoint(workload.ForRetryPolicy(p), ws, ws[0], svcs...) {
		t.Errorf("spec.entrypoints [web-svc]: web should be the entrypoint, vote-bot not")
	}
}
