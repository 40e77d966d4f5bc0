package labyaml

import (
	"fmt"
	"strings"
)

// Image is the lab app's image, as hack/node.sh imports it into the node's containerd.
const Image = "retrycap/lab-app:v0.1.0"

// Join makes one stream of YAML documents.
func Join(docs ...string) string { return strings.Join(docs, "---\n") }

// Namespace is a Namespace; injected labels it for the proxy's injection
// (retrycap.dev/injection: enabled).
func Namespace(name string, injected bool) string {
	if !injected {
		return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", name)
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {retrycap.dev/injection: enabled}\n", name)
}

// Policy is a RetryPolicy selecting the workloads labelled app.kubernetes.io/part-of: PartOf,
// with one entry point.
type Policy struct {
	Namespace, Name string
	PartOf          string
	Cap             int
	Entry           string
	Enforcement     string // Reject, Audit, ...: as written (a placeholder the suite replaces is fine)
	Extra           string // more lines of spec, indented by two spaces, each ending in "\n"
}

func (p Policy) String() string {
	return fmt.Sprintf(`apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: %s, namespace: %s}
spec:
  selector: {matchLabels: {app.kubernetes.io/part-of: %s}}
  maxAmplification: %d
  entrypoints: [{service: %s}]
  enforcement: %s
`, p.Name, p.Namespace, p.PartOf, p.Cap, p.Entry, p.Enforcement) + p.Extra
}

// App is a Deployment of the lab app labelled app.kubernetes.io/name: Name and
// app.kubernetes.io/part-of: PartOf.
type App struct {
	Namespace, Name string
	PartOf          string
	Replicas        int    // 0: not written (the default, 1)
	Upstreams       string // retrycap.dev/upstreams; empty: no annotation
	Env             string // the container's env as a flow sequence ("[{name: LAB_FAIL, value: \"1\"}]"); empty: none
	// Probe gives the app a readiness probe on its counters (/_labapp/stats on 8080): the suites
	// that send traffic wait for it.
	Probe bool
}

func (a App) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, namespace: %s}\nspec:\n", a.Name, a.Namespace)
	if a.Replicas != 0 {
		fmt.Fprintf(&b, "  replicas: %d\n", a.Replicas)
	}
	fmt.Fprintf(&b, "  selector: {matchLabels: {app.kubernetes.io/name: %s}}\n", a.Name)
	fmt.Fprintf(&b, "  template:\n    metadata:\n      labels: {app.kubernetes.io/name: %s, app.kubernetes.io/part-of: %s}\n", a.Name, a.PartOf)
	if a.Upstreams != "" {
		fmt.Fprintf(&b, "      annotations: {retrycap.dev/upstreams: %q}\n", a.Upstreams)
	}
	if a.Env == "" && !a.Probe {
		fmt.Fprintf(&b, "    spec: {containers: [{name: app, image: %s}]}\n", Image)
		return b.String()
	}
	fmt.Fprintf(&b, "    spec:\n      containers:\n      - name: app\n        image: %s\n", Image)
	if a.Env != "" {
		fmt.Fprintf(&b, "        env: %s\n", a.Env)
	}
	if a.Probe {
		b.WriteString("        readinessProbe: {httpGet: {path: /_labapp/stats, port: 8080}, periodSeconds: 2}\n")
	}
	return b.String()
}

// Service is the Service of the app name: its port 8080, named http.
func Service(namespace, name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\n"+
		"spec: {selector: {app.kubernetes.io/name: %s}, ports: [{name: http, port: 8080}]}\n", name, namespace, name)
}

// AdmissionChain is the design's example of the admission gate: gateway -x3-> order -x3->
// payment against a cap of 4 (RetryPolicy checkout, enforcement as given), order still to be
// deployed (Order is what an engineer then applies). injected labels the namespace for the
// proxy's injection (the real node runs the pods; envtest has no kubelet).
func AdmissionChain(namespace, enforcement string, injected bool) string {
	return Join(Namespace(namespace, injected),
		Policy{Namespace: namespace, Name: "checkout", PartOf: "shop", Cap: 4, Entry: "gateway", Enforcement: enforcement}.String(),
		App{Namespace: namespace, Name: "gateway", PartOf: "shop", Upstreams: "order=3"}.String(),
		App{Namespace: namespace, Name: "payment", PartOf: "shop"}.String())
}

// Order is AdmissionChain's missing Deployment, order, trying payment attempts times.
func Order(namespace, attempts string) string {
	return App{Namespace: namespace, Name: "order", PartOf: "shop", Upstreams: "payment=" + attempts}.String()
}
