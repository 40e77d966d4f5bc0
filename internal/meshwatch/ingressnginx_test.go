package meshwatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/mesh"
)

func unstr(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	return u
}

const nginxDeploy = `apiVersion: apps/v1
kind: Deployment
metadata: {name: ingress-nginx-controller, namespace: ingress-nginx}
spec:
  template:
    spec:
      containers:
      - name: controller
        image: registry.k8s.io/ingress-nginx/controller:v1.15.1
        args: [/nginx-ingress-controller, --configmap=$(POD_NAMESPACE)/ingress-nginx-controller]
        env: [{name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}]
`

// TestNginxConfigMapWatched: the watcher reads the controller's Deployment and the ConfigMap it
// names, by an informer of that ConfigMap alone, and follows its changes; a ConfigMap no
// controller names is never read. Before: 3 tries whatever the ConfigMap.
func TestNginxConfigMapWatched(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(10 * time.Second)
	scheme := runtime.NewScheme()
	cm := unstr(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ingress-nginx-controller, namespace: ingress-nginx}\ndata: {proxy-next-upstream-tries: \"5\"}\n")
	other := unstr(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: shop}\ndata: {proxy-next-upstream-tries: \"7\"}\n")
	ing := unstr(t, "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: shop}\nspec:\n  ingressClassName: nginx\n  defaultBackend: {service: {name: frontend}}\n")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "configmaps"}:                                  "ConfigMapList",
		{Group: "apps", Version: "v1", Resource: "deployments"}:                  "DeploymentList",
		{Group: "apps", Version: "v1", Resource: "daemonsets"}:                   "DaemonSetList",
		{Group: "apps", Version: "v1", Resource: "statefulsets"}:                 "StatefulSetList",
		{Group: mesh.GroupNetworking, Version: "v1", Resource: "ingresses"}:      "IngressList",
		{Group: mesh.GroupNetworking, Version: "v1", Resource: "ingressclasses"}: "IngressClassList",
	}, unstr(t, nginxDeploy), cm, other, ing)
	var mu sync.Mutex // the informers list on their goroutines
	var listedCM []string
	dyn.PrependReactor("list", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		listedCM = append(listedCM, a.GetNamespace()+" "+a.(clienttesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: mesh.GroupNetworking + "/v1",
		APIResources: []metav1.APIResource{{Name: "ingresses", Kind: "Ingress"}, {Name: "ingressclasses", Kind: "IngressClass"}},
	}}}}
	w := &Watcher{opts: Options{Recheck: time.Hour, Log: logr.Discard()}, disc: disc, dyn: dyn, running: map[API]*running{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Expect(w.Recheck(ctx)).To(Succeed())
	tries := func() int64 {
		s := w.Set()
		if s == nil {
			return 0
		}
		return s.Entry(mesh.ServiceRef{Namespace: "shop", Name: "frontend"}).Tries()
	}
	g.Eventually(tries).Should(Equal(int64(5)))

	cm2 := cm.DeepCopy()
	g.Expect(unstructured.SetNestedField(cm2.Object, "2", "data", "proxy-next-upstream-tries")).To(Succeed())
	_, err := dyn.Resource(configMapsAPI.GVR()).Namespace("ingress-nginx").Update(ctx, cm2, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(tries).Should(Equal(int64(2)))

	// The controller no longer names it: its informer stops, NewDefault's 3.
	d := unstr(t, nginxDeploy)
	g.Expect(unstructured.SetNestedField(d.Object, []any{map[string]any{"name": "controller", "image": "registry.k8s.io/ingress-nginx/controller:v1.15.1", "args": []any{"/nginx-ingress-controller"}}}, "spec", "template", "spec", "containers")).To(Succeed())
	_, err = dyn.Resource(nginxWorkloadAPIs[0].GVR()).Namespace("ingress-nginx").Update(ctx, d, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(tries).Should(Equal(int64(3)))
	w.mu.Lock()
	g.Expect(w.nginxCMs).To(BeEmpty())
	w.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	g.Expect(listedCM).To(Equal([]string{"ingress-nginx metadata.name=ingress-nginx-controller"}), "only the ConfigMap named is listed")
}

// TestTrimNginx: an ingress-nginx controller keeps its containers' name, image, command, args and
// env (a value or a fieldRef), any other workload its name alone, a ConfigMap the keys
// ingress-nginx's layer reads.
func TestTrimNginx(t *testing.T) {
	d := unstr(t, nginxDeploy)
	g := NewWithT(t)
	g.Expect(unstructured.SetNestedField(d.Object, int64(3), "spec", "replicas")).To(Succeed())
	g.Expect(unstructured.SetNestedField(d.Object, map[string]any{"app": "x"}, "spec", "template", "metadata", "labels")).To(Succeed())
	got, err := yaml.Marshal(Trim(d).Object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: ingress-nginx-controller
  namespace: ingress-nginx
spec:
  template:
    spec:
      containers:
      - args:
        - /nginx-ingress-controller
        - --configmap=$(POD_NAMESPACE)/ingress-nginx-controller
        env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        image: registry.k8s.io/ingress-nginx/controller:v1.15.1
        name: controller
`))
	plain := unstr(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop, resourceVersion: \"9\"}\nspec:\n  template:\n    spec:\n      containers: [{name: web, image: nginx:1.27, env: [{name: A, value: b}]}]\n")
	got, err = yaml.Marshal(Trim(plain).Object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n  resourceVersion: \"9\"\n"), "not a controller: its name alone")
	cm := unstr(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: cfg}\ndata: {proxy-next-upstream-tries: \"5\", proxy-read-timeout: \"10\", log-format-upstream: \"$remote_addr\"}\n")
	got, err = yaml.Marshal(Trim(cm).Object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal("apiVersion: v1\ndata:\n  proxy-next-upstream-tries: \"5\"\n  proxy-read-timeout: \"10\"\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: cfg\n"))
}
