package webhook

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// TestAltTriesNoFitNamesLevers: a route other than the counted one raised on a chain over
// maxTimeToAnswer even at its base was told "lower the callers' attempts", also where every
// caller was at 1 (TestDecideMeshAltTriesLinkerd's "over before the raise too"). It now names
// the route's own timeouts, each application attempt above 1 on the chain, and the policy's
// maximum at the chain's time with the route at its base (advice19). Here reviews calls ratings
// with 2 attempts: 2 x (2 x 6s + 25ms) and the app's backoff, 24.15s, at ratings-rest's limit "1".
func TestAltTriesNoFitNamesLevers(t *testing.T) {
	ns := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, annotations: {linkerd.io/inject: enabled}}`
	svc := `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo}
spec: {ports: [{name: http, port: 9080}]}`
	fast := linkerdRatingsRoute("ratings-fast", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "3", timeout.linkerd.io/request: 1s`, "/fast")
	rest := func(limit string) string {
		return linkerdRatingsRoute("ratings-rest", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "`+limit+`", timeout.linkerd.io/response: 6s`, "/")
	}
	var wls []*workload.Parsed
	for _, d := range []struct{ name, upstreams string }{{"productpage", "reviews=1"}, {"ratings", ""}, {"reviews", "ratings=2"}} {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: d.name}}
		dep.Spec.Template.Annotations = map[string]string{}
		if d.upstreams != "" {
			dep.Spec.Template.Annotations[annotations.Upstreams] = d.upstreams
		}
		w, _ := workload.FromObject(dep)
		wls = append(wls, workload.Parse(w))
	}
	p := timedMeshPolicy(100, v1alpha1.EnforcementReject, 20*time.Second)
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute}
	set := mesh.NewSet(mesh.Options{})
	for _, o := range []string{ns, svc, fast, rest("1")} {
		if _, err := set.AddManifest([]byte(o)); err != nil {
			t.Fatal(err)
		}
	}
	in := MeshInput{Policies: []*v1alpha1.RetryPolicy{p}, Workloads: wls, Set: set, Object: jsonOf(t, rest("2")), Old: jsonOf(t, rest("1"))}
	d := DecideMesh(in)
	expectMeshDecision(t, d, MeshDecision{Message: `RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-rest metadata.annotations["retry.linkerd.io/limit"]: "1" -> "2" (a route other than the counted one: the time takes its tries too) makes ` +
		`productpage 36.25s -> reviews 36.25s -> ratings ? = 36.25s > maxTimeToAnswer 20s; HTTPRoute bookinfo/ratings-rest retry.linkerd.io/limit: "1" does not fit either: ` +
		`lower the timeouts of HTTPRoute bookinfo/ratings-rest (at 2 tries: per-try timeout 6s, timeout unset), Deployment bookinfo/reviews retrycap.dev/upstreams ratings=2, or raise RetryPolicy bookinfo/bookinfo spec.maxTimeToAnswer: 24.15s`})
}
