package analyze

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// Source says where an object came from: file ("-" for stdin) and 1-based document index among
// the file's non-empty documents (and item, for a List).
type Source struct {
	File     string
	Document int
	Item     int // 1-based index in a List, 0 when not in one
}

func (s Source) String() string {
	if s.Item > 0 {
		return fmt.Sprintf("%s: document %d, item %d", s.File, s.Document, s.Item)
	}
	return fmt.Sprintf("%s: document %d", s.File, s.Document)
}

// InputError is bad input at a Source.
type InputError struct {
	Source Source
	Err    error
}

func (e *InputError) Error() string { return e.Source.String() + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Manifests are the policies and workloads read from files.
type Manifests struct {
	Policies  []*v1alpha1.RetryPolicy
	Workloads []workload.Workload
	// Services are the v1 Services read (services.go).
	Services []workload.Service
	// Sources maps policies ("RetryPolicy/ns/name") and workloads (Workload.Key) to where
	// they were read.
	Sources map[string]Source
	// Ignored counts documents of other kinds.
	Ignored int
}

// Reader reads manifests. DefaultNamespace is used for objects without one ("default" if empty).
type Reader struct {
	DefaultNamespace string
	Stdin            io.Reader
}

// ReadPaths reads files, directories (recursively: *.yaml, *.yml, *.json) and "-" (stdin). It
// stops at the first unreadable path; malformed documents and invalid retrycap annotations are
// all collected as *InputError.
func (r Reader) ReadPaths(paths []string) (*Manifests, []error) {
	m := &Manifests{Sources: map[string]Source{}}
	var errs []error
	for _, p := range paths {
		if p == "-" {
			errs = append(errs, r.read(m, "-", r.Stdin)...)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return m, append(errs, err)
		}
		files := []string{p}
		if st.IsDir() {
			files = nil
			err := filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				// Hidden directories (.git, .github) hold no manifests, and a kustomization file is
				// build input for kustomize, not an object: both are passed over in a walk. Any other
				// document without a kind is still an error, never silently dropped.
				if d.IsDir() && path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				if !d.IsDir() && isKustomization(d.Name()) {
					return nil
				}
				switch strings.ToLower(filepath.Ext(path)) {
				case ".yaml", ".yml", ".json":
					if !d.IsDir() {
						files = append(files, path)
					}
				}
				return nil
			})
			if err != nil {
				return m, append(errs, err)
			}
			sort.Strings(files)
		}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				return m, append(errs, err)
			}
			errs = append(errs, r.read(m, f, fh)...)
			fh.Close()
		}
	}
	return m, errs
}

// Read reads one stream of multi-document YAML (or JSON) named file.
func (r Reader) Read(m *Manifests, file string, in io.Reader) []error {
	return r.read(m, file, in)
}

func (r Reader) read(m *Manifests, file string, in io.Reader) []error {
	var errs []error
	yr := utilyaml.NewYAMLReader(bufio.NewReader(in))
	doc := 0
	for {
		raw, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, &InputError{Source{File: file, Document: doc + 1}, err})
			break
		}
		if isEmpty(raw) {
			continue
		}
		doc++
		src := Source{File: file, Document: doc}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			errs = append(errs, &InputError{src, err})
			continue
		}
		errs = append(errs, r.object(m, src, js)...)
	}
	return errs
}

// isKustomization reports whether a file name is one kustomize reads as its kustomization.
func isKustomization(name string) bool {
	switch name {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

func isEmpty(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			return false
		}
	}
	return true
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// ident names an object in an error before it could be decoded ("Kind ns/name"), so a
// type error in its spec still says which object it is.
func (r Reader) ident(tm *typeMeta) string {
	if tm.Metadata.Name == "" {
		return tm.Kind
	}
	ns := tm.Metadata.Namespace
	if ns == "" {
		ns = r.namespace()
	}
	return tm.Kind + " " + ns + "/" + tm.Metadata.Name
}

func (r Reader) object(m *Manifests, src Source, js []byte) []error {
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return []error{&InputError{src, fmt.Errorf("not a Kubernetes object: %w", err)}}
	}
	if tm.Kind == "" {
		return []error{&InputError{src, errors.New("kind is missing")}}
	}
	if strings.HasSuffix(tm.Kind, "List") && tm.APIVersion == "v1" {
		var errs []error
		for i, it := range tm.Items {
			s := src
			s.Item = i + 1
			errs = append(errs, r.object(m, s, it)...)
		}
		return errs
	}
	var obj runtime.Object
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "apps/v1 DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "v1 Pod":
		obj = &corev1.Pod{}
	case "v1 Service":
		return r.service(m, src, js, &tm)
	case v1alpha1.GroupVersion.String() + " RetryPolicy":
		p := &v1alpha1.RetryPolicy{}
		if err := json.Unmarshal(js, p); err != nil {
			return []error{&InputError{src, fmt.Errorf("%s: %w", r.ident(&tm), err)}}
		}
		if p.Namespace == "" {
			p.Namespace = r.namespace()
		}
		if err := defaultPolicy(p); err != nil {
			return []error{&InputError{src, fmt.Errorf("RetryPolicy %s/%s: %w", p.Namespace, p.Name, err)}}
		}
		m.Policies = append(m.Policies, p)
		m.Sources["RetryPolicy/"+p.Namespace+"/"+p.Name] = src
		return nil
	default:
		m.Ignored++
		return nil
	}
	if err := json.Unmarshal(js, obj); err != nil {
		return []error{&InputError{src, fmt.Errorf("%s: %w", r.ident(&tm), err)}}
	}
	w, ok := workload.FromObject(obj)
	if !ok {
		m.Ignored++ // a Pod a controller owns
		return nil
	}
	if w.Namespace == "" {
		w.Namespace = r.namespace()
	}
	m.Workloads = append(m.Workloads, w)
	m.Sources[w.Key()] = src
	return validate(src, w)
}

// validate reports a workload's invalid retrycap annotations, whichever policy selects it.
func validate(src Source, w workload.Workload) []error {
	var errs []error
	if s := w.Annotations[annotations.Service]; s != "" {
		if reason := annotations.ValidateLabel(s); reason != "" {
			errs = append(errs, &InputError{src, &workload.AnnotationError{Workload: w, Annotation: annotations.Service, Value: s,
				Err: fmt.Errorf("service name %q is not a DNS-1123 label: %s", s, reason)}})
		}
	}
	v := w.Annotations[annotations.Upstreams]
	if _, err := annotations.ParseUpstreams(v); err != nil {
		errs = append(errs, &InputError{src, &workload.AnnotationError{Workload: w, Annotation: annotations.Upstreams, Value: v, Err: err}})
	}
	return errs
}

func (r Reader) namespace() string {
	if r.DefaultNamespace != "" {
		return r.DefaultNamespace
	}
	return "default"
}

// defaultPolicy applies the CRD defaults that matter offline and the bounds the API server
// would enforce on them.
func defaultPolicy(p *v1alpha1.RetryPolicy) error {
	if p.Name == "" {
		return errors.New("metadata.name is missing")
	}
	if p.Spec.MaxAmplification < 1 || p.Spec.MaxAmplification > 1000 {
		return fmt.Errorf("spec.maxAmplification must be 1..1000, got %d", p.Spec.MaxAmplification)
	}
	if p.Spec.Enforcement == "" {
		p.Spec.Enforcement = defaults.Enforcement
	}
	switch p.Spec.Enforcement {
	case v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit:
	default:
		return fmt.Errorf("spec.enforcement must be Reject, Rewrite or Audit, got %q", p.Spec.Enforcement)
	}
	if p.Spec.Retry.DefaultAttempts == 0 {
		p.Spec.Retry.DefaultAttempts = defaults.Attempts
	}
	if a := p.Spec.Retry.DefaultAttempts; a < 1 || a > 100 {
		return fmt.Errorf("spec.retry.defaultAttempts must be 1..100, got %d", a)
	}
	for i := range p.Spec.Entrypoints {
		e := &p.Spec.Entrypoints[i]
		if e.ClientAttempts == 0 {
			e.ClientAttempts = defaults.ClientAttempts
		}
		if e.ClientAttempts < 1 || e.ClientAttempts > 100 {
			return fmt.Errorf("spec.entrypoints[%d].clientAttempts must be 1..100, got %d", i, e.ClientAttempts)
		}
		if reason := annotations.ValidateLabel(e.Service); reason != "" {
			return fmt.Errorf("spec.entrypoints[%d].service %q: %s", i, e.Service, reason)
		}
	}
	return nil
}

// Analyze reports on every policy read, sorted by namespace and name.
func (m *Manifests) Analyze() *Report {
	ps := append([]*v1alpha1.RetryPolicy(nil), m.Policies...)
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Namespace != ps[j].Namespace {
			return ps[i].Namespace < ps[j].Namespace
		}
		return ps[i].Name < ps[j].Name
	})
	var prs []PolicyReport
	for _, p := range ps {
		prs = append(prs, ForPolicy(p, m.Workloads, m.Services...))
	}
	return NewReport(prs)
}
