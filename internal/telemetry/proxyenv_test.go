package telemetry

import (
	"reflect"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/workload"
)

// TestPodsLeaveOutTheMeshProxy: the env of a mesh's proxy container is the proxy's own
// configuration (its control plane's address, its owner's URI), not a call the app makes. Before,
// discover on a manifest `istioctl kube-inject` wrote proposed `apis, istiod.istio-system` for
// every workload (ISTIO_META_OWNER kubernetes://apis/..., CA_ADDR istiod.istio-system.svc:15012),
// and Linkerd's injected proxy its destination and identity controllers.
func TestPodsLeaveOutTheMeshProxy(t *testing.T) {
	const doc = `apiVersion: apps/v1
kind: Deployment
metadata: {name: hello, namespace: default}
spec:
  selector: {matchLabels: {app: hello}}
  template:
    metadata:
      labels: {app: hello}
      annotations: {sidecar.istio.io/status: '{"containers":["istio-proxy"]}'}
    spec:
      initContainers:
      - name: istio-init
        args: [istio-iptables, -p, "15001"]
      containers:
      - name: hello
        env: [{name: API, value: "http://api:80"}]
      - name: istio-proxy
        args: [proxy, sidecar, --domain, $(POD_NAMESPACE).svc.cluster.local]
        env:
        - {name: CA_ADDR, value: "istiod.istio-system.svc:15012"}
        - {name: ISTIO_META_OWNER, value: "kubernetes://apis/apps/v1/namespaces/default/deployments/hello"}
      - name: linkerd-proxy
        env: [{name: LINKERD2_PROXY_DESTINATION_SVC_ADDR, value: "linkerd-dst-headless.linkerd.svc.cluster.local.:8086"}]
`
	s := NewManifestSet("default")
	if err := s.AddStream([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	pods, warns := s.Pods()
	if len(pods) != 1 || len(warns) != 0 {
		t.Fatalf("pods %+v, warnings %q", pods, warns)
	}
	want := []EnvVar{
		{Container: "istio-init", Name: "args[0]", Value: "istio-iptables", Arg: true},
		{Container: "istio-init", Name: "args[2]", Value: "15001", Arg: true},
		{Container: "hello", Name: "API", Value: "http://api:80"},
	}
	if !reflect.DeepEqual(pods[0].Env, want) {
		t.Fatalf("env\n got  %+v\n want %+v", pods[0].Env, want)
	}
}

// TestEnvExampleLongValue: a warning quotes a long or multi-line value by the word read in it,
// not whole (istio-cni's AMBIENT_ENABLEMENT_SELECTOR, a YAML selector, filled the line before).
func TestEnvExampleLongValue(t *testing.T) {
	const selector = "- podSelector:\n    matchLabels:\n      istio.io/dataplane-mode: ambient\n- namespaceSelector:\n    matchLabels:\n      istio.io/dataplane-mode: ambient\n"
	in := Input{Pods: []PodEnv{{Kind: "DaemonSet", Namespace: "istio-system", Name: "istio-cni-node",
		Env: []EnvVar{{Container: "install-cni", Name: "AMBIENT_ENABLEMENT_SELECTOR", Value: selector}}}}}
	res := Discover(in)
	want := []string{`env: 2 value(s) of the form name.namespace without a port or scheme name no Service of the input: read as words (a file name, a version), not edges; write host:port, or give the Service (e.g. DaemonSet istio-system/istio-cni-node env AMBIENT_ENABLEMENT_SELECTOR, a 148-byte value: "istio.io" in it)`}
	if !reflect.DeepEqual(res.Warnings, want) {
		t.Fatalf("warnings\n got  %q\n want %q", res.Warnings, want)
	}
}

// TestDiscoverIstioGatewayChart: Istio's gateway chart (istio/istio eed52ebb66ad
// manifests/charts/gateway/templates/deployment.yaml) labels its pods istio: <release name
// without "istio-">, "ingress" for the release Istio's Helm guide installs (istio-ingress), and
// annotates them inject.istio.io/templates: gateway: the gateway's calls make entrypoints, and
// it is never proposed an annotation. Before, only istio: ingressgateway|egressgateway was a
// gateway, and its observed calls were proposed as the gateway Deployment's upstreams.
func TestDiscoverIstioGatewayChart(t *testing.T) {
	ob := mustRead(t, []Answer{answer("istio_requests_total",
		istio("source", "istio-ingress", "istio-ingress", "productpage", "bookinfo", 6))}, Options{Window: time.Minute})
	in := Input{Observation: ob, Workloads: []workload.Workload{
		wl("Deployment", "istio-ingress", "istio-ingress", map[string]string{"istio": "ingress", "app": "istio-ingress"},
			map[string]string{"inject.istio.io/templates": "gateway"}),
	}}
	res := Discover(in)
	if len(res.Workloads) != 0 || len(res.Entrypoints) != 1 || res.Entrypoints[0].Via != "istio-ingress/istio-ingress" || res.Entrypoints[0].Service != "productpage" {
		t.Fatalf("workloads %+v, entrypoints %+v; want none, and productpage via istio-ingress/istio-ingress", res.Workloads, res.Entrypoints)
	}
}
