package mesh

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

// The controller's ConfigMap, read from kubernetes/ingress-nginx at controller-v1.15.1
// (0a5901f3c64f11e92e487799b8da3f00cca37515):
//
//   - Which ConfigMap: the controller's --configmap=NAMESPACE/NAME flag (pkg/flags/flags.go; no
//     flag, no ConfigMap: NewDefault's values). The chart writes
//     `--configmap=$(POD_NAMESPACE)/<fullname>` (charts/ingress-nginx/templates/_params.tpl) and
//     the static deploy.yaml `--configmap=$(POD_NAMESPACE)/ingress-nginx-controller`, with
//     POD_NAMESPACE from fieldRef metadata.namespace: the kubelet expands $(VAR) from the
//     container's env, so the workload's namespace.
//   - Which Ingresses that controller serves: --controller-class (default k8s.io/ingress-nginx,
//     an IngressClass's spec.controller) and --ingress-class (default nginx, the legacy
//     annotation's value).
//   - The keys (internal/ingress/defaults/main.go, config.go NewDefault): proxy-next-upstream
//     ("error timeout"), proxy-next-upstream-tries (3), proxy-next-upstream-timeout (0: none),
//     proxy-connect-timeout (5), proxy-read-timeout (60), proxy-send-timeout (60), whole seconds,
//     retry-non-idempotent (false). template/configmap.go ReadConfig decodes them weakly typed;
//     a value it cannot decode is logged and the default kept, which this reader refuses instead
//     (an error naming the ConfigMap, the key and the value), as it does a bad annotation.
//   - The per-Ingress annotations nginx.ingress.kubernetes.io/<same key> override them
//     (internal/ingress/annotations/proxy/main.go Parse: each unset or invalid annotation falls
//     back to the ConfigMap's value, defBackend).

// ingress-nginx's controller flags, ConfigMap keys and defaults.
const (
	IngressNginxBinary            = "nginx-ingress-controller" // the controller's executable
	IngressNginxFlagConfigMap     = "configmap"
	IngressNginxFlagControllerCls = "controller-class"
	IngressNginxFlagIngressClass  = "ingress-class"
	IngressNginxKeyNextUpstream   = "proxy-next-upstream"
	IngressNginxKeyTries          = "proxy-next-upstream-tries"
	IngressNginxKeyNextTimeout    = "proxy-next-upstream-timeout"
	IngressNginxKeyConnectTimeout = "proxy-connect-timeout"
	IngressNginxKeyReadTimeout    = "proxy-read-timeout"
	IngressNginxKeySendTimeout    = "proxy-send-timeout"
	IngressNginxKeyNonIdempotent  = "retry-non-idempotent"
	IngressNginxAnnotationPrefix  = "nginx.ingress.kubernetes.io/"
	IngressNginxDefaultConnect    = 5 * time.Second  // NewDefault ProxyConnectTimeout
	IngressNginxDefaultRead       = 60 * time.Second // NewDefault ProxyReadTimeout
	IngressNginxDefaultSend       = 60 * time.Second // NewDefault ProxySendTimeout
)

// ingressNginxKeys are the ConfigMap keys read.
var ingressNginxKeys = []string{IngressNginxKeyNextUpstream, IngressNginxKeyTries, IngressNginxKeyNextTimeout,
	IngressNginxKeyConnectTimeout, IngressNginxKeyReadTimeout, IngressNginxKeySendTimeout, IngressNginxKeyNonIdempotent}

// nginxController is an ingress-nginx controller workload, as its flags say.
type nginxController struct {
	id              string // "Deployment ingress-nginx/ingress-nginx-controller"
	controllerClass string
	ingressClass    string
	configMap       string // "namespace/name"; "" without --configmap
}

// nginxConfigMap is a ConfigMap a controller may name: the keys read, as written.
type nginxConfigMap struct {
	id   string // "ConfigMap ingress-nginx/ingress-nginx-controller"
	data map[string]string
}

// nginxObjects are the controllers (by Set key) and the ConfigMaps (by "namespace/name") read.
// Never modified once in a Set: a change replaces the map's entry.
type nginxObjects struct {
	controllers map[string]*nginxController
	configMaps  map[string]*nginxConfigMap
}

func newNginxObjects() nginxObjects {
	return nginxObjects{controllers: map[string]*nginxController{}, configMaps: map[string]*nginxConfigMap{}}
}

func (n nginxObjects) clone() nginxObjects {
	c := newNginxObjects()
	for k, v := range n.controllers {
		c.controllers[k] = v
	}
	for k, v := range n.configMaps {
		c.configMaps[k] = v
	}
	return c
}

// nginxSettings are what a ConfigMap (or NewDefault) sets, parsed.
type nginxSettings struct {
	off                       bool   // proxy-next-upstream lists off
	offRaw                    string // its value, when set
	tries                     int64  // proxy-next-upstream-tries; 0 is no limit
	triesRaw                  string // its value, when set
	nonIdempotent             string // retry-non-idempotent as written, when it is true
	connect, read, send, next time.Duration
	timesSet                  bool // one of the timeouts is written
}

func nginxDefaults() nginxSettings {
	return nginxSettings{tries: IngressNginxDefaultTries, connect: IngressNginxDefaultConnect, read: IngressNginxDefaultRead, send: IngressNginxDefaultSend}
}

// nginxSeconds reads a whole number of seconds, as ingress-nginx's int fields are.
func nginxSeconds(v string) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > int64(graph.Forever/time.Second) {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// settings parses c (nil: NewDefault's). A bad value is an error naming the ConfigMap, the key
// and the value.
func (c *nginxConfigMap) settings() (nginxSettings, error) {
	st := nginxDefaults()
	if c == nil {
		return st, nil
	}
	bad := func(k, want string) error {
		return fmt.Errorf("%s data.%s: %q is not %s (ingress-nginx's %s)", c.id, k, c.data[k], want, k)
	}
	if v, ok := c.data[IngressNginxKeyNextUpstream]; ok {
		st.offRaw = v
		st.off = slices.Contains(strings.Fields(v), "off")
	}
	if v, ok := c.data[IngressNginxKeyTries]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || n < 0:
			return st, bad(IngressNginxKeyTries, "a whole number of tries")
		case n == 0 && !st.off:
			return st, fmt.Errorf("%s data.%s: %q is no limit in nginx (proxy_next_upstream_tries 0): unbounded tries to each backend of every Ingress the controller serves; set a number, or %s: \"off\"", c.id, IngressNginxKeyTries, v, IngressNginxKeyNextUpstream)
		}
		st.tries, st.triesRaw = min(n, graph.Saturated), v
	}
	if v, ok := c.data[IngressNginxKeyNonIdempotent]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return st, bad(IngressNginxKeyNonIdempotent, "a boolean")
		}
		if b {
			st.nonIdempotent = v
		}
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{IngressNginxKeyConnectTimeout, &st.connect}, {IngressNginxKeyReadTimeout, &st.read}, {IngressNginxKeySendTimeout, &st.send}, {IngressNginxKeyNextTimeout, &st.next}} {
		v, ok := c.data[f.key]
		if !ok {
			continue
		}
		d, ok := nginxSeconds(v)
		if !ok {
			return st, bad(f.key, "a whole number of seconds")
		}
		*f.dst, st.timesSet = d, true
	}
	return st, nil
}

// addNginxConfigMap keeps a ConfigMap's ingress-nginx keys (any ConfigMap: which one a controller
// reads is known once its workload is read, in any order). A bad value is an error only once a
// controller names the ConfigMap: an application's own ConfigMap may use the same keys.
func (s *Set) addNginxConfigMap(h header, data map[string]string) error {
	c := &nginxConfigMap{id: h.id(), data: map[string]string{}}
	for _, k := range ingressNginxKeys {
		if v, ok := data[k]; ok {
			c.data[k] = v
		}
	}
	ref := h.Metadata.Namespace + "/" + h.Metadata.Name
	if s.nginxNamed(ref) {
		if _, err := c.settings(); err != nil {
			return err
		}
	}
	s.nginx.configMaps[ref] = c
	return nil
}

// nginxNamed reports whether a controller read names the ConfigMap ref.
func (s *Set) nginxNamed(ref string) bool {
	for _, c := range s.nginx.controllers {
		if c.configMap == ref {
			return true
		}
	}
	return false
}

// workloadObj is the part of a workload an ingress-nginx controller is recognised by.
type workloadObj struct {
	header
	Spec struct {
		Template struct {
			Spec struct {
				Containers []podContainer `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type podContainer struct {
	Name    string   `json:"name"`
	Image   string   `json:"image"`
	Command []string `json:"command"`
	Args    []string `json:"args"`
	Env     []envVar `json:"env"`
}

type envVar struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
	} `json:"valueFrom"`
}

// IngressNginxWorkloadKinds are the workloads read for an ingress-nginx controller (apps/v1).
var IngressNginxWorkloadKinds = []string{"Deployment", "DaemonSet", "StatefulSet"}

// AddIngressNginxController reads a workload (JSON of an apps/v1 Deployment, DaemonSet or
// StatefulSet): when one of its containers runs ingress-nginx's controller, its flags say which
// ConfigMap it reads and which Ingresses it serves. It reports whether the workload is a
// controller; a flag retrycap cannot resolve, or a ConfigMap it names with a bad value, is an
// error naming the object, the field and the value, and the workload is not added. Remove
// (group "apps") drops it.
func (s *Set) AddIngressNginxController(data []byte) (bool, error) {
	var w workloadObj
	if err := json.Unmarshal(data, &w); err != nil {
		return false, fmt.Errorf("decoding %s: %w", describeObject(data, ""), err)
	}
	if w.group() != "apps" || !slices.Contains(IngressNginxWorkloadKinds, w.Kind) || w.Metadata.Name == "" {
		return false, nil
	}
	if w.Metadata.Namespace == "" {
		w.Metadata.Namespace = s.opts.DefaultNamespace
		if w.Metadata.Namespace == "" {
			w.Metadata.Namespace = "default"
		}
	}
	key := w.group() + "/" + w.Kind + "/" + w.Metadata.Namespace + "/" + w.Metadata.Name
	var found *nginxController
	for i, c := range w.Spec.Template.Spec.Containers {
		ctrl, ok, err := nginxControllerOf(w.header, i, c)
		if err != nil {
			return false, err
		}
		if ok {
			found = ctrl
			break
		}
	}
	if found == nil {
		if _, ok := s.nginx.controllers[key]; ok {
			delete(s.nginx.controllers, key) // a new version no longer runs it
			s.idx = nil
		}
		return false, nil
	}
	if cm := s.nginx.configMaps[found.configMap]; cm != nil {
		if _, err := cm.settings(); err != nil {
			return false, fmt.Errorf("%s (read by %s --%s): %w", cm.id, found.id, IngressNginxFlagConfigMap, err)
		}
	}
	s.nginx.controllers[key] = found
	s.idx = nil
	return true, nil
}

// nginxControllerOf reads container i of workload h: whether it runs ingress-nginx's controller
// (its executable in the command or args, or the controller's image), and its flags.
func nginxControllerOf(h header, i int, c podContainer) (*nginxController, bool, error) {
	argv := append(slices.Clone(c.Command), c.Args...)
	start := -1
	for j, a := range argv {
		if path.Base(a) == IngressNginxBinary {
			start = j + 1
			break
		}
	}
	if start < 0 {
		repo, _, _ := strings.Cut(c.Image, "@")
		if k := strings.LastIndexByte(repo, ':'); k > strings.LastIndexByte(repo, '/') {
			repo = repo[:k]
		}
		if !strings.HasSuffix(repo, "ingress-nginx/controller") && !strings.HasSuffix(repo, "ingress-nginx/controller-chroot") {
			return nil, false, nil
		}
		start = len(c.Command) // the image's entrypoint runs it with these args
	}
	ctrl := &nginxController{id: h.id(), controllerClass: IngressNginxController, ingressClass: IngressNginxClass}
	field := func(j int) string {
		if j < len(c.Command) {
			return fmt.Sprintf("%s spec.template.spec.containers[%d].command[%d]", h.id(), i, j)
		}
		return fmt.Sprintf("%s spec.template.spec.containers[%d].args[%d]", h.id(), i, j-len(c.Command))
	}
	for j := start; j < len(argv); j++ {
		a := argv[j]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var dst *string
		switch name {
		case IngressNginxFlagConfigMap:
			dst = &ctrl.configMap
		case IngressNginxFlagControllerCls:
			dst = &ctrl.controllerClass
		case IngressNginxFlagIngressClass:
			dst = &ctrl.ingressClass
		default:
			continue
		}
		at := j
		if !hasValue {
			if j+1 >= len(argv) {
				return nil, false, fmt.Errorf("%s: %q has no value", field(j), a)
			}
			j++
			value, at = argv[j], j
		}
		v, err := expandEnv(value, c, h.Metadata.Namespace)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %q: %w", field(at), argv[at], err)
		}
		*dst = v
	}
	if ctrl.configMap != "" {
		ns, name, ok := strings.Cut(ctrl.configMap, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, false, fmt.Errorf("%s spec.template.spec.containers[%d] --%s: %q is not NAMESPACE/NAME, which ingress-nginx requires (it does not start)", h.id(), i, IngressNginxFlagConfigMap, ctrl.configMap)
		}
	}
	return ctrl, true, nil
}

// expandEnv expands $(VAR) as the kubelet does in a container's args, from the container's env:
// a value, or fieldRef metadata.namespace (the pod's namespace: the workload's). Another source
// (a Secret, a ConfigMap key, another field) is not in the manifest: an error, as the ConfigMap
// read would be a guess.
func expandEnv(s string, c podContainer, namespace string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "$")
		if i < 0 || i+1 >= len(s) {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		switch {
		case s[i+1] == '$':
			b.WriteByte('$') // $$ escapes
			s = s[i+2:]
			continue
		case s[i+1] != '(':
			b.WriteByte('$')
			s = s[i+1:]
			continue
		}
		j := strings.IndexByte(s[i:], ')')
		if j < 0 {
			b.WriteString(s[i:])
			return b.String(), nil
		}
		name := s[i+2 : i+j]
		k := slices.IndexFunc(c.Env, func(e envVar) bool {
			return e.Name == name
		})
		switch {
		case k < 0:
			return "", fmt.Errorf("$(%s) is not an env var of container %s: the kubelet leaves it as written", name, c.Name)
		case c.Env[k].Value != nil:
			b.WriteString(*c.Env[k].Value)
		case c.Env[k].ValueFrom != nil && c.Env[k].ValueFrom.FieldRef != nil && c.Env[k].ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			b.WriteString(namespace)
		default:
			return "", fmt.Errorf("$(%s) comes from outside the manifest (env %s of container %s is not a value or fieldRef metadata.namespace): retrycap cannot tell which ConfigMap the controller reads", name, name, c.Name)
		}
		s = s[i+j+1:]
	}
}

// nginxControllersOf are the controllers read that serve an Ingress whose IngressClass has
// controller ctrl (byController) or whose class name is name (the legacy annotation, or a class
// with no IngressClass in the input), sorted by id.
func (s *Set) nginxControllersOf(name, ctrl string, byController bool) []*nginxController {
	var out []*nginxController
	for _, k := range sortedKeys(s.nginx.controllers) {
		c := s.nginx.controllers[k]
		if byController && c.controllerClass == ctrl || !byController && c.ingressClass == name {
			out = append(out, c)
		}
	}
	return out
}

// nginxServes reports whether a controller read serves IngressClasses of controller ctrl.
func (s *Set) nginxServes(ctrl string) bool {
	for _, c := range s.nginx.controllers {
		if c.controllerClass == ctrl {
			return true
		}
	}
	return false
}

// nginxServesName reports whether a controller read has --ingress-class name.
func (s *Set) nginxServesName(name string) bool {
	for _, c := range s.nginx.controllers {
		if c.ingressClass == name {
			return true
		}
	}
	return false
}

// nginxSource is where an Ingress's defaults come from: a controller and its ConfigMap (nil:
// not in the input, or none named), and how to say so.
type nginxSource struct {
	ctrl *nginxController
	cm   *nginxConfigMap
	st   nginxSettings
	// why says where the defaults come from when no ConfigMap gives them.
	why string
}

// nginxSources are the sources of u's defaults: one per controller serving it, or NewDefault's
// with the reason.
func (s *Set) nginxSources(u ingressUse) []nginxSource {
	if len(u.ctrls) == 0 {
		// One wording whether other controllers are read or not: an Ingress's note does not
		// change with another class's controller.
		why := fmt.Sprintf("no ingress-nginx controller of this class in the input, so no ConfigMap: NewDefault's %d tries assumed", IngressNginxDefaultTries)
		return []nginxSource{{st: nginxDefaults(), why: why}}
	}
	out := make([]nginxSource, 0, len(u.ctrls))
	for _, c := range u.ctrls {
		src := nginxSource{ctrl: c, st: nginxDefaults()}
		switch cm := s.nginx.configMaps[c.configMap]; {
		case c.configMap == "":
			src.why = fmt.Sprintf("controller %s names no ConfigMap (--%s): NewDefault's %d tries", c.id, IngressNginxFlagConfigMap, IngressNginxDefaultTries)
		case cm == nil:
			src.why = fmt.Sprintf("ConfigMap %s of controller %s not in the input: NewDefault's %d tries assumed", c.configMap, c.id, IngressNginxDefaultTries)
		default:
			st, err := cm.settings()
			if err != nil { // checked when added; kept safe
				src.why = fmt.Sprintf("ConfigMap %s of controller %s unreadable: NewDefault's %d tries assumed", c.configMap, c.id, IngressNginxDefaultTries)
				break
			}
			src.cm, src.st = cm, st
		}
		out = append(out, src)
	}
	return out
}

// nginxLayer is the layer of u (an Ingress ingress-nginx serves) under one source of defaults:
// the Ingress's annotations over the ConfigMap's keys over NewDefault's.
func nginxLayer(u ingressUse, src nginxSource) Layer {
	ing := u.ing
	id := ing.id()
	l := Layer{Kind: IngressNginx, Object: id, FieldPath: annotationPath(IngressNginxNextUpstreamTries)}
	off := src.st.off
	if ing.nextSet {
		off = ing.off
	}
	var cmOf string
	if src.cm != nil {
		cmOf = fmt.Sprintf("%s (the default of controller %s)", src.cm.id, src.ctrl.id)
	}
	switch {
	case ing.nextSet && ing.off:
		l.FieldPath, l.Tries = annotationPath(IngressNginxNextUpstream), 1
		l.Note = fmt.Sprintf("%s %s: %q: no retries (ingress-nginx, %s)", id, l.FieldPath, ing.Metadata.Annotations[IngressNginxNextUpstream], u.class)
	case off:
		l.FieldPath, l.Tries, l.Default = annotationPath(IngressNginxNextUpstream), 1, true
		l.Note = fmt.Sprintf("%s data.%s: %q: no retries, %s sets none (ingress-nginx, %s)", cmOf, IngressNginxKeyNextUpstream, src.st.offRaw, id, u.class)
	case ing.tries > 0:
		l.Tries = ing.tries
		l.Note = fmt.Sprintf("%s %s: %q (ingress-nginx, %s)", id, l.FieldPath, ing.Metadata.Annotations[IngressNginxNextUpstreamTries], u.class)
	case src.st.triesRaw != "" && src.st.tries == 0:
		// The ConfigMap's 0 is refused with retries on; an Ingress turning them on meets it here.
		l.Tries, l.Default = graph.Saturated, true
		l.Note = fmt.Sprintf("%s data.%s: %q is no limit in nginx, %s turns retries on with %s and sets no tries: unbounded (ingress-nginx, %s)", cmOf, IngressNginxKeyTries, src.st.triesRaw, id, IngressNginxNextUpstream, u.class)
	case src.st.triesRaw != "":
		l.Tries, l.Default = src.st.tries, true
		l.Note = fmt.Sprintf("%s data.%s: %q, %s sets none (ingress-nginx, %s)", cmOf, IngressNginxKeyTries, src.st.triesRaw, id, u.class)
	case src.cm != nil:
		l.Tries, l.Default = IngressNginxDefaultTries, true
		l.Note = fmt.Sprintf("ingress-nginx default proxy-next-upstream-tries %d, %s sets none and %s neither (%s)", IngressNginxDefaultTries, id, cmOf, u.class)
	default:
		l.Tries, l.Default = IngressNginxDefaultTries, true
		l.Note = fmt.Sprintf("ingress-nginx default proxy-next-upstream-tries %d, %s sets none (%s; %s)", IngressNginxDefaultTries, id, u.class, src.why)
	}
	if src.st.nonIdempotent != "" && l.Tries > 1 {
		l.Note += fmt.Sprintf("; %s data.%s: %q: POST, LOCK and PATCH are retried too", src.cm.id, IngressNginxKeyNonIdempotent, src.st.nonIdempotent)
	}
	return l
}

// nginxTime is the time of u's layer under src: per try, the connect timeout and the read
// timeout (a callee that accepts and never answers holds a try for the read timeout after the
// connection; a request is written at once, so the send timeout is not added); overall, nginx
// starts no try after proxy-next-upstream-timeout, so the last try may end that plus a try
// later. The Ingress's annotations override the ConfigMap's keys.
func nginxTime(u ingressUse, src nginxSource) (LayerTime, string) {
	st := src.st
	source := "ingress-nginx defaults"
	if src.cm != nil && st.timesSet {
		source = src.cm.id
	}
	if u.ing.timesSet {
		source = u.ing.id()
	}
	connect, read, next := st.connect, st.read, st.next
	if u.ing.connect != nil {
		connect = *u.ing.connect
	}
	if u.ing.read != nil {
		read = *u.ing.read
	}
	if u.ing.next != nil {
		next = *u.ing.next
	}
	var lt LayerTime
	if connect > 0 && read > 0 {
		lt.PerTry = connect + read
	}
	if next > 0 && lt.PerTry > 0 {
		lt.Timeout = next + lt.PerTry
	}
	return lt, source
}

// ingressNginxTimeAnnotations are the per-Ingress timeout annotations read, whole seconds.
var ingressNginxTimeAnnotations = []string{IngressNginxKeyConnectTimeout, IngressNginxKeyReadTimeout, IngressNginxKeySendTimeout, IngressNginxKeyNextTimeout}

// readNginxTimeAnnotations reads an Ingress's timeout annotations into ing; a value that is not
// a whole number of seconds is an error naming the annotation.
func readNginxTimeAnnotations(ing *ingressObj) error {
	for _, k := range ingressNginxTimeAnnotations {
		key := IngressNginxAnnotationPrefix + k
		v, ok := ing.Metadata.Annotations[key]
		if !ok {
			continue
		}
		d, ok := nginxSeconds(v)
		if !ok {
			return fmt.Errorf("%s %s: %q is not a whole number of seconds (ingress-nginx's %s)", ing.id(), annotationPath(key), v, k)
		}
		ing.timesSet = true
		switch k {
		case IngressNginxKeyConnectTimeout:
			ing.connect = &d
		case IngressNginxKeyReadTimeout:
			ing.read = &d
		case IngressNginxKeyNextTimeout:
			ing.next = &d
		}
	}
	return nil
}

// IngressNginxConfigMaps are the ConfigMaps ("namespace/name") the controllers read name, sorted:
// the ones a cluster watcher must read (meshwatch), and no others.
func (s *Set) IngressNginxConfigMaps() []string {
	var out []string
	for _, c := range s.nginx.controllers {
		if c.configMap != "" && !slices.Contains(out, c.configMap) {
			out = append(out, c.configMap)
		}
	}
	slices.Sort(out)
	return out
}

// IngressNginxConfigKeys are the ConfigMap keys read (a cluster watcher keeps these alone).
func IngressNginxConfigKeys() []string { return slices.Clone(ingressNginxKeys) }

// IsIngressNginxController reports whether data (a workload's JSON) runs ingress-nginx's
// controller, whatever its flags: a watcher skips the changes of every other workload.
func IsIngressNginxController(data []byte) bool {
	var w workloadObj
	if json.Unmarshal(data, &w) != nil {
		return false
	}
	for i, c := range w.Spec.Template.Spec.Containers {
		if _, ok, err := nginxControllerOf(w.header, i, c); ok || err != nil {
			return true
		}
	}
	return false
}
