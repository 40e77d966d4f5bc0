package analyze

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/jsonfield"
	"github.com/retrycap/retrycap/internal/workload"
)

// The object reader is a table: "apiVersion kind" to the function that reads an object of that
// kind into Manifests. Every kind not in the table is counted (as a mesh object or as ignored),
// warned about when it carries retrycap annotations retrycap cannot read, and offered to the
// mesh Set, which keeps the kinds whose retries it counts. Adding a kind is one row.

// kindReader reads one object whose apiVersion and kind are tm's; js is the whole object.
type kindReader func(r Reader, m *Manifests, src Source, js []byte, tm *typeMeta) []error

// readers are the kinds the graph reads, by "apiVersion kind".
// The kinds of workloads are workload.Kinds' rows (workloadReaders), the one table of them.
var readers = workloadReaders(map[string]kindReader{
	"v1 Service":   Reader.service,         // services.go
	"v1 Namespace": Reader.namespaceObject, // cluster.go: labels for cluster policies; then the mesh Set
	v1alpha1.GroupVersion.String() + " RetryPolicy":        Reader.policy,
	v1alpha1.GroupVersion.String() + " ClusterRetryPolicy": Reader.clusterPolicy, // cluster.go
})

// workloadReaders adds to rs a workloadReader for every kind of workload.Kinds.
func workloadReaders(rs map[string]kindReader) map[string]kindReader {
	for _, k := range workload.Kinds {
		rs[k.APIVersion()+" "+k.Kind] = workloadReader(k.New)
	}
	return rs
}

// meshKinds are the kinds of objects that carry mesh or gateway retries (counted as mesh objects
// in the summary, whether this version reads their retries or not).
var meshKinds = map[string]bool{
	"VirtualService": true, "DestinationRule": true, "ServiceProfile": true, "HTTPRoute": true, "ServiceEntry": true,
	"GRPCRoute": true, "BackendTrafficPolicy": true, "MeshRetry": true, "Mesh": true, "MeshExternalService": true, "MeshHTTPRoute": true, "Resiliency": true, "ServiceRouter": true,
}

// meshRead are the meshKinds whose retries the mesh Set counts.
var meshRead = map[string]bool{
	"VirtualService": true, "ServiceProfile": true, "HTTPRoute": true, "GRPCRoute": true, "BackendTrafficPolicy": true,
	"MeshRetry": true, "Mesh": true, // Kuma (internal/mesh/kuma.go)
	"MeshExternalService": true, // Kuma: which conf its host takes (internal/mesh/kuma.go kumaExtEdge)
	"MeshHTTPRoute":       true, // Kuma: which callees a MeshRetry item naming it covers (internal/mesh/kuma.go kumaRouteCovers)
	"ServiceEntry":        true, // Istio's default route to the external hosts it registers (internal/mesh/serviceentry.go)
	"Resiliency":          true, // Dapr (internal/mesh/dapr.go)
	"ServiceRouter":       true, // Consul (internal/mesh/consul.go)
	"Gateway":             true, // a Gateway API Gateway, as an ambient waypoint (internal/mesh/waypoint.go)
	meshConfigKind:        true, // Istio's defaultHttpRetryPolicy (internal/mesh)
	"Ingress":             true, // ingress-nginx's retries (internal/mesh/ingressnginx.go)
	"IngressClass":        true, // which controller serves an Ingress (internal/mesh/ingressnginx.go)
}

// unreadKinds run pods that retrycap does not read, by "group/Kind"; a retrycap annotation on
// them is lost: what to call them, and what happens to the annotation in a cluster.
var unreadKinds = map[string]struct{ what, cluster string }{
	"argoproj.io/Rollout": {what: "Argo Rollout"},
	// knative/serving v0.51.0 pkg/reconciler/configuration/resources/revision.go (a Revision takes
	// the template's metadata) and pkg/reconciler/revision/resources/meta.go podAnnotations (the
	// Revision's annotations go on its Deployment's pod template).
	"serving.knative.dev/Service":       {what: "Knative Service", cluster: "; in a cluster Knative copies the template's annotations to each Revision's Deployment, where the manager reads them"},
	"serving.knative.dev/Configuration": {what: "Knative Configuration", cluster: "; in a cluster Knative copies the template's annotations to each Revision's Deployment, where the manager reads them"},
}

// apiGroup is apiVersion's group ("" for the core group's "v1").
func apiGroup(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

// ignoredKind names an ignored kind in the summary: its Kind, or "Kind (group)" when the graph
// reads a kind of that name in another group (Knative's Service is not a v1 Service: before it
// read "ignored: Service 2" beside the Services counted as read).
// meshCountedKinds are kinds the mesh objects' summary counts by their name alone, by the group
// it reads them from.
var meshCountedKinds = map[string]string{"Gateway": "gateway.networking.k8s.io"}

func ignoredKind(tm *typeMeta) string {
	// A kind the mesh objects count under the same name (an Istio networking.istio.io Gateway
	// beside the Gateway API's): "mesh objects: Gateway 1; ignored: Gateway 1" said neither
	// which was read.
	if g, ok := meshCountedKinds[tm.Kind]; ok && apiGroup(tm.APIVersion) != g {
		return tm.Kind + " (" + apiGroup(tm.APIVersion) + ")"
	}
	for key := range readers {
		if _, kind, _ := strings.Cut(key, " "); kind == tm.Kind {
			return tm.Kind + " (" + apiGroup(tm.APIVersion) + ")"
		}
	}
	return tm.Kind
}

// readKind reads one object (not a List) by its kind.
func (r Reader) readKind(m *Manifests, src Source, js []byte, tm *typeMeta) []error {
	if read, ok := readers[tm.APIVersion+" "+tm.Kind]; ok {
		return read(r, m, src, js, tm)
	}
	if err := r.otherVersion(src, tm); err != nil {
		return []error{err}
	}
	if err := r.unknownKind(src, tm); err != nil {
		return []error{err}
	}
	if err := r.unknownMeshKind(m, src, tm); err != nil { // meshkinds.go
		return []error{err}
	}
	r.ignored(m, src, tm, js)
	return r.addMesh(m, src, js, tm) // mesh.go
}

// otherVersion refuses a kind the graph reads under another version of its group (apps/v1beta2
// and extensions/v1beta1 Deployments of old charts, retrycap.dev/v1 for v1alpha1): counted as
// ignored, its workload and its upstreams would be dropped while the check passes, and no
// current API server takes it. Another group's kind of the same name (Knative's Service) is not
// this kind and is counted as ignored.
func (r Reader) otherVersion(src Source, tm *typeMeta) error {
	for key := range readers {
		apiVersion, kind, _ := strings.Cut(key, " ")
		if kind != tm.Kind {
			continue
		}
		if g := apiGroup(tm.APIVersion); g == apiGroup(apiVersion) || g == "extensions" && apiGroup(apiVersion) == "apps" {
			why := "the version Kubernetes serves"
			if apiGroup(apiVersion) == v1alpha1.GroupVersion.Group {
				why = "the CRD's version"
			}
			return &InputError{src, fmt.Errorf("%s: apiVersion %s is not read: retrycap reads %s %s (%s)", r.ident(tm), tm.APIVersion, kind, apiVersion, why)}
		}
	}
	return nil
}

// servedKinds knows every kind of the API versions the graph reads kinds from (v1, apps/v1,
// batch/v1, retrycap.dev/v1alpha1), from the types themselves: TestServedKindsCoverReaders
// keeps it in step with readers.
var servedKinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the types' own registration: cannot fail but by a programming error
		}
	}
	return s
}()

// unknownKind refuses a kind that a version the graph reads does not have (apps/v1
// Deploymnet, retrycap.dev/v1alpha1 Retrypolicy): the API server refuses it ("no matches for
// kind"), and counted as ignored its workload and upstreams, or its policy, were dropped while
// the check passed. The mesh API groups the graph reads are checked by unknownMeshKind; other
// groups' kinds (CRDs retrycap does not know) are still counted as ignored: no list of them is
// complete.
func (r Reader) unknownKind(src Source, tm *typeMeta) error {
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil || !servedKinds.IsVersionRegistered(gv) || servedKinds.Recognizes(gv.WithKind(tm.Kind)) {
		return nil
	}
	return r.noSuchKind(src, tm, nearKinds(gv, tm.Kind))
}

// noSuchKind is the error for a kind its apiVersion does not have, with the kinds it may
// misspell.
func (r Reader) noSuchKind(src Source, tm *typeMeta, near []string) error {
	msg := fmt.Sprintf("%s: kind %q: %s has no such kind (the API server refuses it: no matches for kind %q in version %q)",
		r.ident(tm), tm.Kind, tm.APIVersion, tm.Kind, tm.APIVersion)
	if len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	}
	return &InputError{src, errors.New(msg)}
}

// nearKinds are gv's kinds that kind misspells (near); lists and options are not suggested.
func nearKinds(gv schema.GroupVersion, kind string) []string {
	var kinds []string
	for k := range servedKinds.KnownTypes(gv) {
		if !strings.HasSuffix(k, "List") && !strings.HasSuffix(k, "Options") {
			kinds = append(kinds, k)
		}
	}
	return near(kinds, kind)
}

// near are the kinds of kinds that kind misspells, sorted: the one that is the same but for
// case, else those one edit away (two for a kind of 8 letters or more; Pod and Node are two
// apart).
func near(kinds []string, kind string) []string {
	for _, k := range kinds {
		if strings.EqualFold(k, kind) {
			return []string{k} // httproute is HTTPRoute, not TCPRoute
		}
	}
	var out []string
	for _, k := range kinds {
		if editDistance(strings.ToLower(k), strings.ToLower(kind)) <= max(1, min(2, len(kind)/4)) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// editDistance is the Levenshtein distance of a and b (bytes: kinds are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// laterWins is the one rule for an object given twice: the later wins, with a warning naming
// both places. key names the object in m.Sources ("RetryPolicy/ns/name", a workload's Key);
// what names it in the warning; same picks the earlier one out of objs, which is returned
// without it.
func laterWins[T any](m *Manifests, objs []T, key, what string, src Source, same func(T) bool) []T {
	if prev, dup := m.Sources[key]; dup {
		m.warn(src, "%s is also at %s: the later wins", what, prev)
		objs = slices.DeleteFunc(objs, same)
	}
	m.Sources[key] = src
	return objs
}

// decode decodes an object of a kind the graph reads into obj as the API server would
// (internal/jsonfield): a field it does not know (an annotation under spec.template instead of
// spec.template.metadata, "Annotations" capitalised) is an error rather than a value read
// here and dropped by the cluster, or read by neither and silently lost; a wrong type names
// its path and value. An object without metadata.name is an error too: kubectl apply refuses it,
// and two of them would be one object here.
func (r Reader) decode(src Source, js []byte, tm *typeMeta, obj any) error {
	if err := jsonfield.Decode(js, obj); err != nil {
		return &InputError{src, fmt.Errorf("%s: %w", r.ident(tm), err)}
	}
	return r.named(src, js, tm)
}

// named requires metadata.name (decode; a workloadReader for what it reads: a Pod a controller
// owns has only a generateName, and is not read).
func (r Reader) named(src Source, js []byte, tm *typeMeta) error {
	if tm.Metadata.Name == "" {
		var gen struct {
			Metadata struct {
				GenerateName string `json:"generateName"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(js, &gen)
		if g := gen.Metadata.GenerateName; g != "" {
			return &InputError{src, fmt.Errorf("%s: metadata.name is missing (metadata.generateName %q names an object only when the API server creates it, kubectl create; kubectl apply refuses it): give it a name", r.ident(tm), g)}
		}
		return &InputError{src, fmt.Errorf("%s: metadata.name is missing", r.ident(tm))}
	}
	// A name or namespace the API server refuses ("WEB", 300 characters): read, its workload
	// was no node of the graph, and the policy "selected no workload" without a word on why.
	check, rule := validation.IsDNS1123Subdomain, "a DNS-1123 subdomain"
	switch tm.Kind {
	case "Service":
		check, rule = validation.IsDNS1035Label, "a DNS-1035 label"
	case "Namespace":
		check, rule = validation.IsDNS1123Label, "a DNS-1123 label"
	}
	if errs := check(tm.Metadata.Name); len(errs) > 0 {
		return &InputError{src, fmt.Errorf("%s: metadata.name %s is not %s, the API server refuses it: %s", r.ident(tm), shortQuote(tm.Metadata.Name), rule, strings.Join(errs, "; "))}
	}
	if ns := tm.Metadata.Namespace; ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return &InputError{src, fmt.Errorf("%s: metadata.namespace %s is not a DNS-1123 label, the API server refuses it: %s", r.ident(tm), shortQuote(ns), strings.Join(errs, "; "))}
		}
	}
	return nil
}

// shortQuote quotes a name for a message, cut to 70 bytes and its length ("aaa..." (300 bytes)).
func shortQuote(s string) string {
	if len(s) <= 70 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:70]), len(s))
}

// policy reads a RetryPolicy into m.Policies.
func (r Reader) policy(m *Manifests, src Source, js []byte, tm *typeMeta) []error {
	if err := checkPolicyFields(js); err != nil {
		return []error{&InputError{src, fmt.Errorf("%s: %w", r.ident(tm), err)}}
	}
	p := &v1alpha1.RetryPolicy{}
	if err := r.decode(src, js, tm, p); err != nil {
		return []error{err}
	}
	if p.Namespace == "" {
		p.Namespace = r.namespace()
	}
	if err := defaultPolicy(p.Name, &p.Spec, false); err != nil {
		return []error{&InputError{src, fmt.Errorf("RetryPolicy %s/%s: %w", p.Namespace, p.Name, err)}}
	}
	m.Policies = laterWins(m, m.Policies, "RetryPolicy/"+p.Namespace+"/"+p.Name, "RetryPolicy "+p.Namespace+"/"+p.Name, src,
		func(q *v1alpha1.RetryPolicy) bool { return q.Namespace == p.Namespace && q.Name == p.Name })
	m.Policies = append(m.Policies, p)
	m.Summary.Policies = len(m.Policies)
	return nil
}

// workloadReader reads a workload of workload.Kinds (newObj makes the typed object) into
// m.Workloads; a Pod, Job or ReplicaSet a controller owns is counted, not read (its workload,
// the owner, is: workload.Covered).
func workloadReader(newObj func() runtime.Object) kindReader {
	return func(r Reader, m *Manifests, src Source, js []byte, tm *typeMeta) []error {
		obj := newObj()
		if err := jsonfield.Decode(js, obj); err != nil {
			return []error{&InputError{src, fmt.Errorf("%s: %w", r.ident(tm), err)}}
		}
		w, ok := workload.FromObject(obj)
		if !ok {
			m.count(&m.Summary.Ignored, tm.Kind+" (owned)")
			return nil
		}
		if err := r.named(src, js, tm); err != nil {
			return []error{err}
		}
		if w.Namespace == "" {
			w.Namespace = r.namespace()
			if m.unnamespaced == nil {
				m.unnamespaced = map[string]int{}
			}
			if _, dup := m.Sources[w.Key()]; !dup {
				m.unnamespaced[w.Namespace]++
			}
		}
		for _, path := range nullRetrycapAnnotations(js, tm.Kind) {
			m.warn(src, "%s: %s is null (YAML's empty value: a template that rendered nothing?): read as \"\", as the API server stores it; quote the value, or leave the key out", w, path)
		}
		if tm.Kind != workload.KindPod {
			own := obj.(metav1.Object).GetAnnotations()
			w.Annotations = workload.PairsOf(r.ownAnnotations(m, src, w, own))
		}
		if cj, ok := obj.(*batchv1.CronJob); ok {
			// The Jobs' own metadata: the Jobs get it, their pods (which the injector and the
			// proxy see) do not; the gate warns of it in the same words.
			for _, msg := range workload.JobTemplateWarnings(w, cj.Spec.JobTemplate.Annotations) {
				m.warn(src, "%s", msg)
			}
		}
		declares := func(x workload.Workload) bool {
			return strings.TrimSpace(x.Annotations.Get(annotations.Upstreams)) != ""
		}
		m.Workloads = laterWins(m, m.Workloads, w.Key(), w.String(), src, func(x workload.Workload) bool {
			if x.Key() == w.Key() && declares(x) {
				m.Summary.WithUpstreams--
			}
			return x.Key() == w.Key()
		})
		m.Workloads = append(m.Workloads, w)
		// A pod template alone can put its workload in a mesh layer (Dapr's dapr.io/enabled,
		// Consul's connect-inject, Istio's and Kuma's pod labels) with no object the Set reads in
		// the input: the Set must exist for it. Before (kuma19), a workloads-only input had none,
		// and a Dapr caller's 4 tries were counted as 1.
		m.meshSet(r.namespace())
		m.Summary.Workloads = len(m.Workloads)
		if declares(w) {
			m.Summary.WithUpstreams++
		}
		if errs := r.addNginxController(m, src, js, tm); errs != nil { // ingressnginx.go
			return errs
		}
		return validate(m, src, w)
	}
}

// nullRetrycapAnnotations are the paths of the retrycap annotations written null on a workload of
// kind (its own metadata's, its pod template's): decoded as "", a retrycap.dev/upstreams that a
// template rendered empty ("upstreams: {{ .Values.up }}" with no value) declared nothing, without
// a word.
func nullRetrycapAnnotations(js []byte, kind string) []string {
	var obj map[string]any
	if json.Unmarshal(js, &obj) != nil {
		return nil
	}
	k, _ := workload.KindOf(kind)
	var out []string
	bases := [][]string{nil} // a Pod's own metadata; a templated workload's, then its template's
	if len(k.TemplatePath) > 0 {
		bases = append(bases, k.TemplatePath)
	}
	for _, base := range bases {
		var v any = obj
		for _, f := range append(append(append([]string(nil), base...), "metadata"), "annotations") {
			mm, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = mm[f]
		}
		ann, _ := v.(map[string]any)
		for _, key := range slices.Sorted(maps.Keys(ann)) {
			if ann[key] == nil && strings.HasPrefix(key, "retrycap.dev/") {
				prefix := "metadata.annotations"
				if len(base) > 0 {
					prefix = strings.Join(base, ".") + ".metadata.annotations"
				}
				out = append(out, prefix+"["+strconv.Quote(key)+"]")
			}
		}
	}
	return out
}
