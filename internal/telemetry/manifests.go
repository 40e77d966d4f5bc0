package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// ServicePort is one port of a Service, as read from the manifests.
type ServicePort struct {
	Name, AppProtocol string
	Port              int32
	// Protocol is the port's spec.ports[].protocol (TCP, UDP, SCTP), "" when not written.
	Protocol string
}

// ServiceDef is a v1 Service read from the manifests, with what discover needs of it.
type ServiceDef struct {
	Namespace, Name string
	Selector        map[string]string
	Ports           []ServicePort
}

// EnvVar is one environment variable of a container, its value resolved.
type EnvVar struct {
	Container, Name, Value string
	// From says where the value came from when not written in the container: "ConfigMap
	// NAME key KEY" (valueFrom.configMapKeyRef, or envFrom.configMapRef).
	From string
	// Arg: not a variable but an item of the container's command or args (Name "args[1]",
	// "command[0]"), its value after a leading "-flag=" or "--flag=": BuoyantIO/booksapp's
	// traffic container calls webapp through args ["-initial-delay=30s", "webapp:7000"].
	Arg bool
}

// Source is the variable as an edge's source: "env PAYMENT_ADDR (container app)", or for an
// argument "args[1] (container traffic)".
func (e EnvVar) Source() string {
	if e.Arg {
		return e.String()
	}
	return "env " + e.String()
}

// label is the variable in a warning's example: "env NAME", or "args[1]".
func (e EnvVar) label() string {
	if e.Arg {
		return e.Name
	}
	return "env " + e.Name
}

// IsManifestSource reports whether a Proposal's source is the manifests' (an env variable or a
// command/args item), not a telemetry source.
func IsManifestSource(s string) bool {
	return strings.HasPrefix(s, "env ") || strings.HasPrefix(s, "args[") || strings.HasPrefix(s, "command[")
}

// argItems are a container's command and args as EnvVars (Arg true), a "-flag=value" item read
// as its value.
func argItems(c corev1.Container, vars map[string]string, left *int, cut func(name string)) []EnvVar {
	var out []EnvVar
	for _, list := range []struct {
		name  string
		items []string
	}{{"command", c.Command}, {"args", c.Args}} {
		for i, a := range list.items {
			if strings.HasPrefix(a, "-") {
				_, v, ok := strings.Cut(a, "=")
				if !ok {
					continue // a flag alone ("-v", "--debug")
				}
				a = v
			}
			name := fmt.Sprintf("%s[%d]", list.name, i)
			v, over := expandVars(a, vars, left)
			if over {
				cut(name)
			}
			out = append(out, EnvVar{Container: c.Name, Name: name, Value: v, Arg: true})
		}
	}
	return out
}

// dataPlaneSidecars are the containers other meshes and runtimes inject beside the app, whose env
// and args address their control plane: Kuma's kuma-sidecar and kuma-init (kumahq/kuma
// pkg/plugins/runtime/k8s/util/names.go; KUMA_CONTROL_PLANE_URL
// http://kuma-control-plane.kuma-system:5681 was proposed as an upstream of every injected
// workload), Dapr's daprd (dapr/dapr pkg/injector/consts SidecarContainerName; its
// --control-plane-address, --placement-host-address and --sentry-address) and Consul's
// consul-dataplane (its -addresses).
var dataPlaneSidecars = map[string]bool{"kuma-sidecar": true, "kuma-init": true, "daprd": true, "consul-dataplane": true}

// expandVars expands the $(NAME) references of s to the values of vars, as the kubelet expands
// an env value (against the variables before it), command and args (against all of the
// container's): "$$" is a "$", and a reference to a name not in vars is left as written (the
// kubelet leaves it so; a Secret's value is not read here). Before, "http://$(ORDER_HOST):8080"
// named nothing. left is what may still be expanded (maxExpansion, shared by a Pods call):
// values expand against values already expanded, so a few lines of env can multiply to
// gigabytes ("$(A)" 64 times in B, B 64 times in C, ...); a reference whose value is longer than
// what is left stays as written, and cut says one did.
func expandVars(s string, vars map[string]string, left *int) (out string, cut bool) {
	if !strings.Contains(s, "$") {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String(), cut
			}
			name := s[i+2 : i+2+end]
			v, ok := vars[name]
			if ok && len(v) > *left {
				ok, cut = false, true
			}
			if ok {
				*left -= len(v)
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), cut
}

// maxExpansion bounds the bytes $(NAME) references expand to in one Pods call (expandVars): the
// addresses an env value holds are short (a cluster of 5,000 Deployments with 5 references of 50
// bytes each expands 1.25 MB), and 16 MiB is a small part of what reading the manifests takes.
const maxExpansion = 16 << 20

// String names the variable for an edge's source: "PAYMENT_ADDR (container app)", with its
// ConfigMap when it came from one.
func (e EnvVar) String() string {
	s := e.Name + " (container " + e.Container
	if e.From != "" {
		s += ", " + e.From
	}
	return s + ")"
}

// PodEnv is a workload's containers' environment.
type PodEnv struct {
	Kind, Namespace, Name string
	Labels                map[string]string
	Env                   []EnvVar
}

// Key is Kind/Namespace/Name, as internal/workload's Workload.Key.
func (p PodEnv) Key() string { return p.Kind + "/" + p.Namespace + "/" + p.Name }

type podRaw struct {
	kind string
	meta metav1.ObjectMeta
	tmpl corev1.PodTemplateSpec
}

// ManifestSet collects, from the same files analyze reads, the containers' env, the ConfigMaps
// and the Services (with their ports: a port's protocol says whether an edge is HTTP).
type ManifestSet struct {
	Services   []ServiceDef
	configMaps map[string]map[string]string // namespace/name -> data
	pods       []podRaw
	// podAt and serviceAt index pods and Services by kind/namespace/name and namespace/name.
	podAt, serviceAt map[string]int
	// DefaultNamespace is the namespace of objects that name none ("default" when empty).
	DefaultNamespace string
}

// NewManifestSet returns an empty set.
func NewManifestSet(defaultNamespace string) *ManifestSet {
	if defaultNamespace == "" {
		defaultNamespace = "default"
	}
	return &ManifestSet{configMaps: map[string]map[string]string{}, podAt: map[string]int{}, serviceAt: map[string]int{}, DefaultNamespace: defaultNamespace}
}

// AddStream reads a stream of YAML (or JSON) documents. Documents that are not objects of the
// kinds it reads are passed over (analyze reports on every document; this reads beside it).
func (s *ManifestSet) AddStream(data []byte) error {
	rd := utilyaml.NewYAMLReader(bufioReader(data))
	for n := 1; ; n++ {
		doc, err := rd.Read()
		if err != nil {
			if isEOF(err) {
				return nil
			}
			return fmt.Errorf("document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			continue // analyze reports the malformed document
		}
		if err := s.AddObject(js); err != nil {
			return fmt.Errorf("document %d: %w", n, err)
		}
	}
}

// AddObject reads one object (JSON): a workload of workload.Kinds (a Deployment, StatefulSet,
// DaemonSet, standalone ReplicaSet or Job, CronJob or bare Pod), a ConfigMap, a Service or a
// List of them.
func (s *ManifestSet) AddObject(js []byte) error {
	var tm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil //nolint:nilerr // not an object: analyze says so
	}
	if strings.HasSuffix(tm.Kind, "List") {
		for _, it := range tm.Items {
			if err := s.AddObject(it); err != nil {
				return err
			}
		}
		return nil
	}
	ns := func(m *metav1.ObjectMeta) {
		if m.Namespace == "" {
			m.Namespace = s.DefaultNamespace
		}
	}
	if k, ok := workload.KindOf(tm.Kind); ok && k.APIVersion() == tm.APIVersion {
		obj := k.New()
		if err := json.Unmarshal(js, obj); err != nil {
			return fmt.Errorf("decoding a %s: %w", k.Kind, err)
		}
		if o, isPod := obj.(*corev1.Pod); isPod {
			ns(&o.ObjectMeta)
			if !workload.Covered(k.Kind, &o.ObjectMeta) {
				s.addPod(podRaw{k.Kind, o.ObjectMeta, corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}})
			}
			return nil
		}
		// Every templated kind of workload.Kinds, its template where the kind keeps it; a Job or
		// ReplicaSet a controller owns is its owner's, as analyze reads it.
		kind, meta, tmpl, ok := workload.TemplateOf(obj)
		if !ok {
			return fmt.Errorf("a %s: workload.TemplateOf has no case for it (a row of workload.Kinds without its reader)", k.Kind)
		}
		ns(meta)
		if !workload.Covered(kind, meta) {
			s.addPod(podRaw{kind, *meta, *tmpl})
		}
		return nil
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 ConfigMap":
		var o corev1.ConfigMap
		if err := json.Unmarshal(js, &o); err != nil {
			return fmt.Errorf("decoding a ConfigMap: %w", err)
		}
		ns(&o.ObjectMeta)
		s.configMaps[o.Namespace+"/"+o.Name] = o.Data
	case "v1 Service":
		var o corev1.Service
		if err := json.Unmarshal(js, &o); err != nil {
			return fmt.Errorf("decoding a Service: %w", err)
		}
		ns(&o.ObjectMeta)
		d := ServiceDef{Namespace: o.Namespace, Name: o.Name, Selector: o.Spec.Selector}
		for _, p := range o.Spec.Ports {
			ap := ""
			if p.AppProtocol != nil {
				ap = *p.AppProtocol
			}
			d.Ports = append(d.Ports, ServicePort{Name: p.Name, AppProtocol: ap, Port: p.Port, Protocol: string(p.Protocol)})
		}
		// A Service given twice is the later, as for workloads (addPod).
		key := d.Namespace + "/" + d.Name
		if i, ok := s.serviceAt[key]; ok {
			s.Services[i] = d
			return nil
		}
		s.serviceAt[key] = len(s.Services)
		s.Services = append(s.Services, d)
	}
	return nil
}

// addPod adds p, in place of an object of the same kind, namespace and name read before: an
// object given twice is the later, as analyze reads it ("the later wins"), and as kubectl apply
// leaves it. Before, both were kept and discover proposed the calls of an object that analyze
// had replaced (linkerd2's test/integration: Deployment default/slow-cooker in five files, the
// upstreams of all five proposed).
func (s *ManifestSet) addPod(p podRaw) {
	key := p.kind + "/" + p.meta.Namespace + "/" + p.meta.Name
	if i, ok := s.podAt[key]; ok {
		s.pods[i] = p
		return
	}
	s.podAt[key] = len(s.pods)
	s.pods = append(s.pods, p)
}

// Pods resolves every workload's env (ConfigMap references against the ConfigMaps read) and
// returns them sorted by key, with a warning for each reference to a ConfigMap, or a key of
// one, that the input does not hold (its values are unknown, not empty).
func (s *ManifestSet) Pods() ([]PodEnv, []string) {
	var out []PodEnv
	var warns []string
	left := maxExpansion
	for _, p := range s.pods {
		pe := PodEnv{Kind: p.kind, Namespace: p.meta.Namespace, Name: p.meta.Name, Labels: p.tmpl.Labels}
		cs := append(append([]corev1.Container(nil), p.tmpl.Spec.InitContainers...), p.tmpl.Spec.Containers...)
		for _, c := range cs {
			if mesh.IsProxyContainer(c.Name) || dataPlaneSidecars[c.Name] {
				// The mesh's proxy (already injected, or Istio's gateways and ztunnel, which name
				// their container istio-proxy): its env and args configure the proxy (CA_ADDR
				// istiod.istio-system.svc:15012, ISTIO_META_OWNER kubernetes://apis/...,
				// Linkerd's LINKERD2_PROXY_DESTINATION_SVC_ADDR), not calls the app makes.
				continue
			}
			// The container's environment as the kubelet builds it: a name set again overrides
			// what came before it (the last envFrom source wins; env over envFrom; a later env
			// entry over an earlier), whatever the later value's source (a Secret's, a field's,
			// whose values are not read). Before, every value was read, and a ConfigMap's URL that
			// the container's own env overrides was proposed as a call. unset marks an
			// overridden value by its index in env.
			var env []EnvVar
			at, unset := map[string]int{}, map[int]bool{}
			vars := map[string]string{} // the values defined so far, for $(NAME) (expandVars)
			cutAt := ""                 // the first variable whose expansion maxExpansion cut
			cut := func(name string) {
				if cutAt == "" {
					cutAt = name
					warns = append(warns, fmt.Sprintf("%s %s/%s container %s: env %s: $(NAME) references expand to more than %d bytes in all: those past it are left as written, not read", pe.Kind, pe.Namespace, pe.Name, c.Name, name, maxExpansion))
				}
			}
			set := func(name string, v *EnvVar) {
				if i, ok := at[name]; ok {
					unset[i] = true
				}
				if v == nil {
					delete(at, name)
					delete(vars, name)
					return
				}
				at[name] = len(env)
				env = append(env, *v)
				vars[name] = v.Value
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef == nil {
					continue
				}
				data, ok := s.configMaps[pe.Namespace+"/"+ef.ConfigMapRef.Name]
				if !ok {
					if ef.ConfigMapRef.Optional == nil || !*ef.ConfigMapRef.Optional {
						warns = append(warns, fmt.Sprintf("%s %s/%s container %s: envFrom ConfigMap %q is not in the input: its values are not read", pe.Kind, pe.Namespace, pe.Name, c.Name, ef.ConfigMapRef.Name))
					}
					continue
				}
				keys := make([]string, 0, len(data))
				for k := range data {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					set(ef.Prefix+k, &EnvVar{Container: c.Name, Name: ef.Prefix + k, Value: data[k], From: fmt.Sprintf("ConfigMap %s key %s", ef.ConfigMapRef.Name, k)})
				}
			}
			for _, e := range c.Env {
				switch {
				case e.ValueFrom == nil:
					v, over := expandVars(e.Value, vars, &left)
					if over {
						cut(e.Name)
					}
					set(e.Name, &EnvVar{Container: c.Name, Name: e.Name, Value: v})
				case e.ValueFrom.ConfigMapKeyRef != nil:
					ref := e.ValueFrom.ConfigMapKeyRef
					data, ok := s.configMaps[pe.Namespace+"/"+ref.Name]
					v, has := data[ref.Key]
					if !ok || !has {
						if ref.Optional == nil || !*ref.Optional {
							warns = append(warns, fmt.Sprintf("%s %s/%s container %s: env %s names ConfigMap %q key %q, not in the input: its value is not read", pe.Kind, pe.Namespace, pe.Name, c.Name, e.Name, ref.Name, ref.Key))
						}
						set(e.Name, nil)
						continue
					}
					set(e.Name, &EnvVar{Container: c.Name, Name: e.Name, Value: v, From: fmt.Sprintf("ConfigMap %s key %s", ref.Name, ref.Key)})
				default:
					set(e.Name, nil) // a Secret's, a field's or a resource's: not read
				}
			}
			for i, v := range env {
				if !unset[i] {
					pe.Env = append(pe.Env, v)
				}
			}
			pe.Env = append(pe.Env, argItems(c, vars, &left, cut)...)
		}
		out = append(out, pe)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, warns
}
