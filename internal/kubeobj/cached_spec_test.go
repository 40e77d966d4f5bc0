package kubeobj

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// The cache keeps what the graph and the mesh layers read of a template's spec and nothing more:
// the AWS SDK retry variables of the container giving the most tries, the mesh proxy containers,
// and the marks of an injected template by key only. The controller then sees the layers the
// gate sees on the admitted object (#28).
func TestTrimForCacheKeepsSpecInputs(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			"sidecar.istio.io/status":           `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy"]}`,
			"prometheus.io/scrape":              "true",
			"retrycap.dev/upstreams":            "orders.s3.amazonaws.com",
			"kubectl.kubernetes.io/restartedAt": "2026-12-01T00:00:00Z",
		}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "istio-init"}},
			Containers: []corev1.Container{
				{Name: "app", Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}, {Name: "AWS_RETRY_MODE", Value: "standard"}, {Name: "AWS_REGION", Value: "eu-west-1"}}},
				{Name: "worker", Env: []corev1.EnvVar{{Name: "AWS_MAX_ATTEMPTS", Value: "7"}}},
				{Name: "istio-proxy", Env: []corev1.EnvVar{{Name: "ISTIO_META_CLUSTER_ID", Value: "Kubernetes"}}},
			},
		},
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "order"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}
	got, err := TrimForCache(d)
	if err != nil {
		t.Fatal(err)
	}
	want := &CachedWorkload{Kind: workload.KindDeployment, Namespace: "shop", Name: "order",
		Labels:      workload.PairsOf(nil),
		Annotations: workload.PairsOf(map[string]string{"sidecar.istio.io/status": "", "retrycap.dev/upstreams": "orders.s3.amazonaws.com"}),
		Extra:       &CachedSpec{AWS: workload.AWSEnv{Container: "worker", MaxAttempts: "7"}, Proxies: []string{"istio-proxy"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("trimmed Deployment:\n got %+v %+v\nwant %+v %+v", got, got.(*CachedWorkload).Extra, want, want.Extra)
	}
	full, _ := workload.FromObject(d)
	cached := got.(*CachedWorkload).Workload()
	if !full.AWS.Equal(cached.AWS) || !reflect.DeepEqual(full.Proxies, cached.Proxies) {
		t.Fatalf("the cached workload reads AWS %+v proxies %v, the object %+v %v", cached.AWS, cached.Proxies, full.AWS, full.Proxies)
	}
	set := mesh.NewSet(mesh.Options{})
	if !set.InIstio(full.MeshCaller()) || !set.InIstio(cached.MeshCaller()) {
		t.Fatalf("injected: the object's caller in Istio %v, the cache's %v; want both", set.InIstio(full.MeshCaller()), set.InIstio(cached.MeshCaller()))
	}

	// A template that sets none of it keeps no spec at all.
	plain := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "AWS_REGION", Value: "eu-west-1"}}}}}}}}
	got, _ = TrimForCache(plain)
	if x := got.(*CachedWorkload).Extra; x != nil {
		t.Fatalf("a template without AWS retry variables or a mesh proxy keeps %+v", x)
	}
}
