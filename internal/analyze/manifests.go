package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/jsonfield"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/textbom"
	"github.com/retrycap/retrycap/internal/workload"
)

// Source says where an object came from: file ("-" for stdin) and 1-based document index among
// the file's non-empty documents (and item, for a List); Line is the document's first line.
type Source struct {
	File     string
	Document int
	Item     int // 1-based index in a List, 0 when not in one
	Line     int // 1-based line of the document's first line in File, 0 when not known
}

func (s Source) String() string {
	if s.Document == 0 {
		return s.File
	}
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

// Warning is something read that does not stop the check but changes what it means: an
// annotation in the wrong place, an object given twice, a file skipped, a port dropped.
type Warning struct {
	Source Source
	Msg    string
}

func (w Warning) String() string { return w.Source.String() + ": " + w.Msg }

// Summary is what was read, printed before the report: a check that read nothing useful must
// say so rather than pass.
type Summary struct {
	Files     int `json:"files"`
	Objects   int `json:"objects"`
	Workloads int `json:"workloads"`
	// WithUpstreams is how many workloads declare retrycap.dev/upstreams.
	WithUpstreams int `json:"withUpstreams"`
	Services      int `json:"services"`
	// Namespaces is how many Namespace objects were read: their labels and annotations put
	// workloads in a mesh and select them for ClusterRetryPolicies (before, they were counted
	// as ignored).
	Namespaces int `json:"namespaces,omitempty"`
	Policies   int `json:"policies"`
	// ClusterPolicies is how many ClusterRetryPolicies were read.
	ClusterPolicies int `json:"clusterPolicies,omitempty"`
	// Mesh counts the mesh objects read (VirtualService, HTTPRoute, ...) by kind: the retries of
	// those mesh.Reads reads multiply the edges they configure; the others (DestinationRule,
	// MeshRetry) are not counted by this version (a warning says so).
	Mesh map[string]int `json:"mesh,omitempty"`
	// Ignored counts the other objects by kind (a Pod a controller owns counts as "Pod (owned)").
	Ignored map[string]int `json:"ignored,omitempty"`
	// Skipped is how many files or documents were skipped as not Kubernetes manifests.
	Skipped int `json:"skipped,omitempty"`
}

// Manifests are the policies and workloads read from files.
type Manifests struct {
	Policies []*v1alpha1.RetryPolicy
	// ClusterPolicies are the ClusterRetryPolicies read (cluster.go).
	ClusterPolicies []*v1alpha1.ClusterRetryPolicy
	// NamespaceLabels are the labels of the Namespace objects read, and of those given with
	// SetNamespaceLabels (--namespace-labels), which win: what a cluster policy's
	// namespaceSelector selects by.
	NamespaceLabels map[string]map[string]string
	Workloads       []workload.Workload
	// Services are the v1 Services read (services.go).
	Services []workload.Service
	// Sources maps policies ("RetryPolicy/ns/name", "ClusterRetryPolicy/name") and workloads
	// (Workload.Key) to where they were read.
	Sources  map[string]Source
	Summary  Summary
	Warnings []Warning
	// MeshOptions are the mesh Set's (--istio-default-retries), set before reading.
	MeshOptions mesh.Options

	mesh *mesh.Set // mesh.go
	// meshObjects are the mesh objects read, as JSON, by "Kind ns/name" (mesh.Layer.Object):
	// -o patch rewrites their retry fields (mesh_patch.go).
	meshObjects map[string]meshObject
	// flagLabels are the namespaces SetNamespaceLabels gave labels for (cluster.go).
	flagLabels map[string]bool
	// unnamespaced counts the workloads read without metadata.namespace, by the namespace they
	// were read in (the Reader's default): a policy that selects nothing in its own namespace
	// says where they went.
	unnamespaced map[string]int
	// unnamespacedRoutes are the route and retry objects read without metadata.namespace, in
	// the order read: one read into a namespace that holds none of the input's Services and
	// workloads routes to nothing there (Analyze warns).
	unnamespacedRoutes []unnamespacedRoute
	// configMaps counts the ConfigMaps counted as ignored, by "namespace/name": the ones an
	// ingress-nginx controller read later names move to the mesh count (Analyze).
	configMaps map[string]int
}

// Reader reads manifests. DefaultNamespace is used for objects without one ("default" if empty).
type Reader struct {
	DefaultNamespace string
	Stdin            io.Reader
	// Recursive reads directories recursively (-R); otherwise, as kubectl -f DIR, only the
	// files directly in them, with a warning for each subdirectory that holds manifests.
	Recursive bool
	// Each, when set, is given every document read as an object (its JSON, a List whole), in
	// the order read, before its kind is read: a second reader of the same files (discover's env
	// reader) takes them from here instead of parsing the YAML again. Files skipped (an
	// unrendered Helm template, a Chart.yaml, a kustomization file) and documents that do not
	// parse give it nothing.
	Each func(js []byte)
}

// NewManifests returns an empty set to read into.
func NewManifests() *Manifests { return &Manifests{Sources: map[string]Source{}} }

func (m *Manifests) warn(src Source, format string, args ...any) {
	m.Warnings = append(m.Warnings, Warning{Source: src, Msg: fmt.Sprintf(format, args...)})
}

// hasManifestExt reports whether a file name is one a directory read takes.
func hasManifestExt(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// ReadPaths reads files, directories (*.yaml, *.yml, *.json; recursively with r.Recursive) and
// "-" (stdin) into a new Manifests. It stops at the first unreadable path; malformed documents
// and invalid retrycap annotations are all collected as *InputError.
func (r Reader) ReadPaths(paths []string) (*Manifests, []error) {
	m := NewManifests()
	errs := r.ReadPathsInto(m, paths)
	return m, errs
}

// Files lists the files -f p reads, as kubectl -f does (a file; a directory's manifests, with
// -R its subdirectories'), with what it passes over as warnings in m (a subdirectory without
// -R, a link to a directory, no manifest at all); a directory holding a kustomization is a
// *KustomizationError. discover reads its files through it, so both commands read the same.
func (r Reader) Files(m *Manifests, p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		// Named as the user gave it (-f PATH): os' "stat PATH" names a system call, not the flag.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("-f %s: %w", p, err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	files, err := r.dirFiles(m, p)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		m.warn(Source{File: p}, "a directory with no *.yaml, *.yml or *.json file: nothing read from it")
	}
	return files, nil
}

// ReadPathsInto is ReadPaths into m.
func (r Reader) ReadPathsInto(m *Manifests, paths []string) []error {
	var errs []error
	for _, p := range paths {
		if p == "-" {
			errs = append(errs, r.read(m, "-", r.Stdin)...)
			continue
		}
		files, err := r.Files(m, p)
		if err != nil {
			return append(errs, err)
		}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				return append(errs, err)
			}
			errs = append(errs, r.read(m, f, fh)...)
			fh.Close()
		}
	}
	return errs
}

// KustomizationError is -f on a directory that holds a kustomization: its files are build input
// (a patch file looks like a whole Deployment, and reading it as one gives a false answer), so
// the directory is refused rather than read; -k builds it, and its plain manifests can still be
// named one by one with -f.
type KustomizationError struct {
	Dir  string // the directory read with -f (-R: the one under it that holds the kustomization)
	File string // the kustomization file
}

func (e *KustomizationError) Error() string {
	return fmt.Sprintf("%s holds a kustomization (%s): its files are kustomize's build input, not objects (a patch is not a Deployment): use -k %s, or name its plain manifests one by one with -f",
		e.Dir, filepath.Base(e.File), e.Dir)
}

// dirFiles lists the manifest files of dir, sorted. Hidden directories (.git, .github) hold no
// manifests; a directory holding a kustomization is refused (KustomizationError).
func (r Reader) dirFiles(m *Manifests, dir string) ([]string, error) {
	var files []string
	if !r.Recursive {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, d := range ents {
			path := filepath.Join(dir, d.Name())
			if symlinkedDir(m, path, d) || notRegular(m, path, d) {
				continue
			}
			switch {
			case d.IsDir() && !strings.HasPrefix(d.Name(), "."):
				if n := countManifestFiles(path); n > 0 {
					m.warn(Source{File: path}, "a subdirectory with %d manifest file(s), not read: use -R to read directories recursively", n)
				}
			case !d.IsDir() && isKustomization(d.Name()):
				return nil, &KustomizationError{Dir: dir, File: path}
			case !d.IsDir() && hasManifestExt(d.Name()):
				files = append(files, path)
			}
		}
		return files, nil
	}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if symlinkedDir(m, path, d) || notRegular(m, path, d) {
			return nil
		}
		if !d.IsDir() && isKustomization(d.Name()) {
			return &KustomizationError{Dir: filepath.Dir(path), File: path}
		}
		if !d.IsDir() && hasManifestExt(path) {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// symlinkedDir reports whether d, at path in a directory being read, is a symbolic link to a
// directory, and warns that it is not read: kubectl -f DIR (-R too) does not follow one, so
// what analyze checks is what kubectl applies; following it could also loop.
func symlinkedDir(m *Manifests, path string, d os.DirEntry) bool {
	if d.Type()&os.ModeSymlink == 0 {
		return false
	}
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	target, _ := os.Readlink(path)
	m.warn(Source{File: path}, "a symbolic link to a directory (%s), not read: kubectl -f does not follow one either; name it with -f to read it", target)
	return true
}

// notRegular reports whether d, a manifest file by its name at path in a directory being read, is
// a named pipe, a device or a socket (itself, or what its link points to), and warns that it is
// not read: a pipe with no writer blocked the read forever and a device (a link to /dev/zero)
// never ends. Named with -f it is read (a shell's <(...) is a pipe).
func notRegular(m *Manifests, path string, d os.DirEntry) bool {
	if d.IsDir() || !hasManifestExt(d.Name()) || d.Type().IsRegular() {
		return false
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() || st.IsDir() {
		return false // a dangling link is reported when opened; a link to a directory by symlinkedDir
	}
	what := "a device"
	switch {
	case st.Mode()&os.ModeNamedPipe != 0:
		what = "a named pipe"
	case st.Mode()&os.ModeSocket != 0:
		what = "a socket"
	}
	m.warn(Source{File: path}, "%s, not a regular file: not read from a directory (it may never end, or wait for a writer forever); name it with -f to read it", what)
	return true
}

// countManifestFiles counts the manifest files under dir (hidden directories passed over).
func countManifestFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && hasManifestExt(path) && !isKustomization(d.Name()) {
			n++
		}
		return nil
	})
	return n
}

// Read reads one stream of multi-document YAML (or JSON) named file.
func (r Reader) Read(m *Manifests, file string, in io.Reader) []error {
	return r.read(m, file, in)
}

// document is one YAML document of a file and the line it starts on.
type document struct {
	raw  []byte
	line int
}

// splitDocuments splits a stream at "---" lines, as k8s.io/apimachinery's YAMLReader does (a
// separator may be followed by blanks or a comment only), keeping each document's first line.
// A document is a slice of data, not a copy (the copy was 50 MB of allocations for an 8.6 MB
// file, appended line by line).
func splitDocuments(data []byte) []document {
	var docs []document
	begin, pos := 0, 0 // the current document's first byte; the next line's
	blank := true      // the current document holds only blank lines so far
	start, line := 1, 0
	for pos < len(data) {
		end := len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		l := data[pos:end]
		line++
		if bytes.HasPrefix(l, []byte("---")) {
			rest := bytes.TrimSpace(l[3:])
			if len(rest) == 0 || rest[0] == '#' {
				docs = append(docs, document{raw: data[begin:pos:pos], line: start})
				begin, pos, blank, start = end, end, true, line+1
				continue
			}
		}
		if blank && len(bytes.TrimSpace(l)) == 0 {
			start = line + 1 // leading blank lines (all of them: the line is the first content's)
		} else {
			blank = false
		}
		pos = end
	}
	return append(docs, document{raw: data[begin:pos:pos], line: start})
}

// yamlLine is the "line N" of a YAML parser's message, which counts from the document's first
// line.
var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// leadingBlanks counts the blank lines at the head of a document, which its line skips and the
// parser counts.
func leadingBlanks(raw []byte) int {
	n := 0
	for {
		l, rest, ok := bytes.Cut(raw, []byte("\n"))
		if !ok || len(bytes.TrimSpace(l)) > 0 {
			return n
		}
		n, raw = n+1, rest
	}
}

// fileLines rewrites the document-relative line numbers of a YAML error into the file's (the
// document starts at line first), and puts its lines on one ("yaml: unmarshal errors:\n  line
// 3: key ... already set in map").
func fileLines(err error, first int) error {
	msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(s string) string {
		n, _ := strconv.Atoi(yamlLine.FindStringSubmatch(s)[1])
		return "line " + strconv.Itoa(n+first-1)
	})
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, ":\n", ": ")), " ")
	return errors.New(msg)
}

func (r Reader) read(m *Manifests, file string, in io.Reader) []error {
	data, err := readLimited(file, in)
	if err != nil {
		return []error{&InputError{Source{File: file}, err}}
	}
	m.Summary.Files++
	if filepath.Base(file) == "Chart.yaml" {
		m.Summary.Skipped++
		m.warn(Source{File: file}, "a Helm chart, not a Kubernetes manifest: skipped (run helm template first)")
		return nil
	}
	if isKustomization(filepath.Base(file)) {
		// Named with -f (a directory holding one is refused): its build input, not objects.
		m.Summary.Skipped++
		m.warn(Source{File: file}, "a kustomization file, not a Kubernetes manifest: skipped (use -k %s to build it)", filepath.Dir(file))
		return nil
	}
	type parsed struct {
		src Source
		js  []byte
		err error
	}
	var docs []parsed
	helm := false
	n := 0
	var split []document
	for _, d := range splitDocuments(data) {
		split = append(split, jsonStream(d)...)
	}
	for _, d := range split {
		if isEmpty(d.raw) {
			continue
		}
		n++
		src := Source{File: file, Document: n, Line: d.line}
		// A document written as JSON is read as JSON (kubectl reads it so first): one pass of
		// encoding/json instead of two of the YAML parser (the conversion, then afterFirst's look
		// for text after it): 107 times its size allocated before, for a 2.9 MB VirtualService
		// (TestReadHugeJSONDocumentBounded). Anything it does not take (a key twice, a number it
		// cannot write as the YAML path does, text after the value) takes the YAML path below,
		// whose errors say what is wrong.
		js, isJSON := jsonDocument(d.raw)
		var err error
		if !isJSON {
			if err := aliasBound(d.raw); err != nil {
				docs = append(docs, parsed{src, nil, r.nameDocumentError(err, d)})
				continue
			}
			// Strict: a key given twice in one mapping is an error, as the API server's strict
			// field validation (kubectl's default) makes it; YAMLToJSON would keep the later
			// silently.
			js, err = yamlToJSON(d.raw, true)
			if err != nil && bytes.Contains(d.raw, []byte("<<")) && strings.Contains(err.Error(), "already set in map") && literalDuplicate(d.raw) == "" {
				// A key the mapping sets over one a merge key (<<: *base) brought in is YAML's
				// merge, which kubectl reads (the mapping's own value wins); the strict parser
				// takes it for a key written twice.
				js, err = yamlToJSON(d.raw, false)
			}
			if err != nil && strings.Contains(err.Error(), "already set in map") {
				// A key twice in a document that is no Kubernetes object (no apiVersion, no kind:
				// Kuma's universal Dataplanes, an app's config) is that document's business: it
				// is skipped as not a manifest, as it would be without the repeat (before, it
				// stopped the check as an error naming no object).
				if loose, lerr := yamlToJSON(d.raw, false); lerr == nil && noTypeMeta(loose) {
					js, err = loose, nil
				}
			}
			if err != nil && bytes.Contains(d.raw, []byte("{{")) {
				helm = true
			}
			if err == nil {
				if more, extra := afterFirst(d.raw); more {
					m.warn(src, "more than one YAML document in it (a '...' line, or '---' with content on its line): only the first is read, as kubectl reads only the first; put each document after a line of its own '---'")
				} else if extra != nil {
					err = fmt.Errorf("text after the object: %w", extra)
				}
			}
		}
		if err != nil {
			err = fileLines(syntaxLine(err, d.raw), d.line-leadingBlanks(d.raw))
			err = controlAt(err, d)
			err = invalidUTF8At(err, d)
			err = jsonSyntaxAt(err, d)
			err = r.nameDocumentError(err, d)
		}
		docs = append(docs, parsed{src, js, err})
	}
	if helm {
		m.Summary.Skipped++
		m.warn(Source{File: file}, "looks like a Helm template: skipped (run helm template first)")
		return nil
	}
	var errs []error
	for _, d := range docs {
		if d.err != nil {
			errs = append(errs, &InputError{d.src, d.err})
			continue
		}
		if r.Each != nil {
			r.Each(d.js)
		}
		errs = append(errs, r.object(m, d.src, d.js, nil, 0)...)
	}
	return errs
}

// MaxInputBytes bounds what is read from one file or stream (a -k build's output too): a
// device (-f /dev/zero) or a stream that does not end was read until memory ran out. Reading
// one document takes some 25 times its size live at its peak (the YAML parser's node tree and
// the map decoded from it; 42x in heap, 55-63x in RSS: docs/benchmarks.md; a document written
// as JSON is read by encoding/json instead, 38x allocated in all where the YAML path took 107x:
// jsonDocument), a file of many documents that of its largest one and the JSON of all; the largest real inputs (a rendered chart
// with its CRDs, kubectl get -A -o yaml of a large cluster) are a few MiB to a few tens.
const MaxInputBytes = 64 << 20

// readLimited reads in whole (a byte-order mark decoded), or says that it is over MaxInputBytes,
// having read at most one byte more.
func readLimited(file string, in io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(in, MaxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxInputBytes {
		return nil, fmt.Errorf("more than %d MiB: not read (retrycap reads at most %d MiB from one file or stream; a device such as /dev/zero, or a stream that does not end?): split the input, or name its parts one by one with -f", MaxInputBytes>>20, MaxInputBytes>>20)
	}
	return textbom.Bytes(data)
}

// aliasBound refuses a document whose aliases expand it past MaxInputBytes: the YAML parser's
// own guard counts aliases, not bytes, so 200 aliases of a 1 MiB string (a 1 MiB file) were
// expanded to 200 MiB of JSON (7 s, 816 MB), and 2,000 would exhaust memory. The expanded size
// is summed over the parsed tree, each node once (yaml.v3 keeps an alias as a node).
func aliasBound(raw []byte) error {
	if !bytes.Contains(raw, []byte("*")) || !bytes.Contains(raw, []byte("&")) {
		return nil
	}
	var doc yamlv3.Node
	if yamlv3.Unmarshal(raw, &doc) != nil {
		return nil // the parser that reads it says what is wrong
	}
	const limit = int64(MaxInputBytes)
	memo := map[*yamlv3.Node]int64{}
	var size func(n *yamlv3.Node) int64
	size = func(n *yamlv3.Node) int64 {
		if v, ok := memo[n]; ok {
			return v
		}
		memo[n] = limit + 1 // an alias inside its own anchor (refused by the parsers) stops here
		var total int64
		switch n.Kind {
		case yamlv3.AliasNode:
			if n.Alias != nil {
				total = size(n.Alias)
			}
		case yamlv3.ScalarNode:
			total = int64(len(n.Value)) + 2
		default:
			for _, c := range n.Content {
				if total += size(c) + 1; total > limit {
					break
				}
			}
		}
		total = min(total, limit+1)
		memo[n] = total
		return total
	}
	if size(&doc) > limit {
		return fmt.Errorf("yaml: its aliases (*name) expand it to more than %d MiB: not read (an alias bomb? retrycap reads at most %d MiB of a file or a document)", MaxInputBytes>>20, MaxInputBytes>>20)
	}
	return nil
}

// literalDuplicate returns the first key written twice in one mapping of raw ("" when none),
// leaving out the keys a merge key ("<<") brings in, which the mapping's own keys override.
func literalDuplicate(raw []byte) string {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(raw, &doc) != nil {
		return ""
	}
	var walk func(n *yamlv3.Node) string
	walk = func(n *yamlv3.Node) string {
		if n.Kind == yamlv3.MappingNode {
			seen := map[string]bool{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Kind == yamlv3.ScalarNode && k.Tag != "!!merge" && k.Value != "<<" {
					if seen[k.Value] {
						return k.Value
					}
					seen[k.Value] = true
				}
			}
		}
		for _, c := range n.Content {
			if dup := walk(c); dup != "" {
				return dup
			}
		}
		return ""
	}
	return walk(&doc)
}

// controlAt adds to a YAML parser's "control characters are not allowed", which says neither
// which nor where, the first such byte of the document and its line and column in the file (a NUL
// left by an editor or a bad copy is otherwise a hunt through the file).
func controlAt(err error, d document) error {
	if !strings.Contains(err.Error(), "control characters are not allowed") {
		return err
	}
	line, col := d.line-leadingBlanks(d.raw), 1
	for _, r := range string(d.raw) {
		switch {
		case r == '\n':
			line, col = line+1, 1
			continue
		case r == '\t' || r == '\r' || r == 0x85 || r == '\ufeff':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == 0xfffe || r == 0xffff:
			return fmt.Errorf("%w (%U at line %d, column %d)", err, r, line, col)
		}
		col++
	}
	return err
}

// invalidUTF8At adds to a YAML parser's "invalid leading UTF-8 octet" (and its kin), which says
// neither which byte nor where, the first byte that is not UTF-8 and its line and column in the
// file (a Latin-1 "é" pasted into a value).
func invalidUTF8At(err error, d document) error {
	if !strings.Contains(err.Error(), "UTF-8 octet") {
		return err
	}
	line, col := d.line-leadingBlanks(d.raw), 1
	for raw := d.raw; len(raw) > 0; {
		r, size := utf8.DecodeRune(raw)
		if r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("%w (byte 0x%02X at line %d, column %d)", err, raw[0], line, col)
		}
		if r == '\n' {
			line, col = line+1, 0
		}
		col++
		raw = raw[size:]
	}
	return err
}

// afterFirst reports what follows a chunk's first YAML document, which YAMLToJSON passes over
// silently: another document (more; after a "..." end marker, or a "--- x" line, which
// splitDocuments takes for content as kubectl's reader does), or text that is no document (extra,
// as "{...} trailing words"). Only a chunk that can hold one is parsed again.
func afterFirst(raw []byte) (more bool, extra error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' && t[0] != '[' && !bytes.Contains(raw, []byte("\n...")) && !bytes.HasPrefix(raw, []byte("...")) &&
		!bytes.Contains(raw, []byte("\n---")) && !bytes.HasPrefix(raw, []byte("---")) {
		return false, nil
	}
	dec := yamlv2.NewDecoder(bytes.NewReader(raw))
	var v any
	if dec.Decode(&v) != nil {
		return false, nil // YAMLToJSON read it: leave its reading alone
	}
	switch err := dec.Decode(&v); {
	case errors.Is(err, io.EOF):
		return false, nil
	case err != nil:
		return false, err
	}
	return v != nil, nil
}

// jsonStream splits a document that is a stream of JSON values ({...}{...}, as jq -c and some
// generators write them, and kubectl reads each) into one document per value; YAML reads only
// the first and dropped the others silently. Anything else (a single value, YAML, a value with
// text after it) is returned as it is.
func jsonStream(d document) []document {
	t := bytes.TrimLeft(d.raw, " \t\r\n\ufeff")
	if len(t) == 0 || t[0] != '{' && t[0] != '[' {
		return []document{d}
	}
	dec := json.NewDecoder(bytes.NewReader(d.raw))
	var out []document
	start := int64(0)
	// at is the part of the document from start to end as a document of its own.
	at := func(start, end int64) document {
		raw := d.raw[start:end]
		// The value's first line: the document's, plus the lines before the value.
		lead := len(raw) - len(bytes.TrimLeft(raw, " \t\r\n"))
		line := d.line - leadingBlanks(d.raw) + bytes.Count(d.raw[:int(start)+lead], []byte("\n"))
		return document{raw: raw[lead:], line: line}
	}
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			rest := at(start, int64(len(d.raw)))
			if len(out) == 0 || rest.raw[0] != '{' && rest.raw[0] != '[' {
				return []document{d}
			}
			// A later value that does not parse is a document of its own, so that its error
			// names it, its line and the parser's message (before, the first value was
			// blamed for "text after the object").
			return append(out, rest)
		}
		end := dec.InputOffset()
		out = append(out, at(start, end))
		start = end
	}
	if len(out) < 2 {
		return []document{d}
	}
	return out
}

// arrayOfObjects refuses a document that is a list of Kubernetes objects ([{"apiVersion": ...,
// "kind": ...}, ...], as jq -s or a script's json.dump writes them): kubectl refuses it ("Object
// 'Kind' is missing"), and skipped as "not a manifest" its workloads and policies were dropped
// while the check passed on the rest. A list of anything else (a JSON patch) is left to the
// caller to skip.
func arrayOfObjects(js []byte) error {
	var items []json.RawMessage
	if json.Unmarshal(js, &items) != nil {
		return nil
	}
	var named []string
	for _, it := range items {
		var tm typeMeta
		// An object has a kind and an apiVersion, or at least a kind and a name: a list of
		// {"kind": "Kubernetes", "clusterName": ...} is an app's config (Istio's test topology
		// files), skipped as a list is, not refused as objects kubectl would refuse.
		if json.Unmarshal(it, &tm) != nil || tm.Kind == "" || tm.APIVersion == "" && tm.Metadata.Name == "" {
			continue
		}
		id := tm.Kind
		if tm.Metadata.Name != "" {
			id += " " + tm.Metadata.Name
		}
		named = append(named, id)
	}
	if len(named) == 0 {
		return nil
	}
	first := named[0]
	if len(named) > 1 {
		first += fmt.Sprintf(" and %d more", len(named)-1)
	}
	return fmt.Errorf("a list of %d Kubernetes object(s) (%s), not an object: kubectl refuses it (Object 'Kind' is missing); write them as a kind: List with items, or one document each", len(named), first)
}

// noTypeMeta reports whether js is a JSON object with neither apiVersion nor kind.
func noTypeMeta(js []byte) bool {
	var tm struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	t := bytes.TrimSpace(js)
	return len(t) > 0 && t[0] == '{' && json.Unmarshal(js, &tm) == nil && tm.APIVersion == nil && tm.Kind == nil
}

// nullItems reports whether a List's items are given as null (kubectl reads an empty list;
// before, the List itself was counted as an ignored object).
func nullItems(js []byte) bool {
	var o map[string]json.RawMessage
	if json.Unmarshal(js, &o) != nil {
		return false
	}
	v, ok := o["items"]
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("null"))
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

// clusterScoped are the kinds read that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRetryPolicy": true}

// ident names an object in an error before it could be decoded ("Kind ns/name"), so a
// type error in its spec still says which object it is.
func (r Reader) ident(tm *typeMeta) string {
	if tm.Metadata.Name == "" {
		return tm.Kind
	}
	if clusterScoped[tm.Kind] {
		return tm.Kind + " " + tm.Metadata.Name
	}
	ns := tm.Metadata.Namespace
	if ns == "" {
		ns = r.namespace()
	}
	return tm.Kind + " " + ns + "/" + tm.Metadata.Name
}

// maxListDepth bounds how deep Lists nest in one document (kubectl flattens a List in a List):
// each level decodes its items again, so 4,000 levels of a 175 KB document took 6 s and 524 MB.
const maxListDepth = 32

// object reads one decoded document (or List item); typed is the apiVersion and kind a typed
// List gives its items that do not name their own; depth is how many Lists hold it.
func (r Reader) object(m *Manifests, src Source, js []byte, typed *typeMeta, depth int) []error {
	trimmed := bytes.TrimSpace(js)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if len(trimmed) > 0 && trimmed[0] != '{' {
		if err := arrayOfObjects(trimmed); err != nil {
			return []error{&InputError{src, err}}
		}
		m.Summary.Skipped++
		what := "not a Kubernetes object"
		if trimmed[0] == '[' {
			what = "a list, not a Kubernetes object (a JSON patch, as kustomize's patches are?)"
		}
		m.warn(src, "%s: skipped", what)
		return nil
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		err = jsonfield.Describe(js, err)
		if id := looseJSONIdent(js); id != "" {
			return []error{&InputError{src, fmt.Errorf("%s: %w", id, err)}}
		}
		return []error{&InputError{src, fmt.Errorf("not a Kubernetes object: %w", err)}}
	}
	if typed != nil {
		if tm.Kind == "" {
			tm.Kind = typed.Kind
		}
		if tm.APIVersion == "" {
			tm.APIVersion = typed.APIVersion
		}
		var obj map[string]any
		if err := json.Unmarshal(js, &obj); err == nil {
			obj["kind"], obj["apiVersion"] = tm.Kind, tm.APIVersion
			js, _ = json.Marshal(obj)
		}
	}
	if strings.Contains(tm.Metadata.Name, "{{") || strings.Contains(tm.Metadata.Namespace, "{{") {
		// A template that happens to parse ("name: '{{ .Values.name }}'"): no object has such a name.
		m.Summary.Skipped++
		m.warn(src, "looks like a Helm template (metadata.name %q, metadata.namespace %q): skipped (run helm template first)", tm.Metadata.Name, tm.Metadata.Namespace)
		return nil
	}
	if tm.Kind == "" && tm.APIVersion == "" {
		m.Summary.Skipped++
		m.warn(src, "not a Kubernetes manifest (no apiVersion, no kind): skipped")
		return nil
	}
	if tm.Kind == "" {
		what := "apiVersion " + tm.APIVersion
		if tm.Metadata.Name != "" {
			what += fmt.Sprintf(", metadata.name %q", tm.Metadata.Name)
		}
		if tm.Metadata.Namespace != "" {
			what += fmt.Sprintf(", metadata.namespace %q", tm.Metadata.Namespace)
		}
		return []error{&InputError{src, fmt.Errorf("kind is missing (%s)", what)}}
	}
	if tm.APIVersion == "" {
		return []error{&InputError{src, fmt.Errorf("%s: apiVersion is missing", r.ident(&tm))}}
	}
	if strings.HasSuffix(tm.Kind, "List") && (tm.Items != nil || nullItems(js)) {
		if depth >= maxListDepth {
			return []error{&InputError{src, fmt.Errorf("%s %s: a List nested more than %d deep: not read (kubectl flattens a List in a List; no tool writes them this deep)", tm.APIVersion, tm.Kind, maxListDepth)}}
		}
		var item *typeMeta
		if tm.Kind != "List" {
			item = &typeMeta{APIVersion: tm.APIVersion, Kind: strings.TrimSuffix(tm.Kind, "List")}
		}
		var errs []error
		for i, it := range tm.Items {
			s := src
			s.Item = i + 1
			errs = append(errs, r.object(m, s, it, item, depth+1)...)
		}
		return errs
	}
	m.Summary.Objects++
	r.templateWarning(m, src, js, &tm)
	return r.readKind(m, src, js, &tm) // kinds.go
}

// templateWarning warns of an object the graph reads (a workload, a Service, a policy, a mesh
// route) with a Go template expression in a value: a Helm chart's template that still parses as
// YAML ("image: \"{{ .Values.image }}\"", linkerd2's test manifests' "http://{{ .Host }}:8080").
// It is read as written, as kubectl would apply it (docs/decisions.md, input2_19): "{{" is a
// real value too (a container's --format={{.Name}}); a ConfigMap's or Secret's data is free text
// (Prometheus's alert templates) and not warned of.
func (r Reader) templateWarning(m *Manifests, src Source, js []byte, tm *typeMeta) {
	if !bytes.Contains(js, []byte("{{")) || tm.Kind == "ConfigMap" || tm.Kind == "Secret" {
		return
	}
	if _, ok := readers[tm.APIVersion+" "+tm.Kind]; !ok && !mesh.Reads(tm.APIVersion, tm.Kind) {
		return
	}
	var v any
	if json.Unmarshal(js, &v) != nil {
		return // readKind says what is wrong
	}
	path, val, ok := firstTemplate(v, "")
	if !ok {
		return // "{{" only in a key
	}
	const maxShown = 80
	if len(val) > maxShown {
		n := maxShown
		for !utf8.RuneStart(val[n]) {
			n--
		}
		val = val[:n] + "..."
	}
	m.warn(src, "%s: a template expression in %q (%q): read as written; if this is a Helm chart's template, run helm template first and analyze its output", r.ident(tm), path, val)
}

// firstTemplate returns the path and value of the first string holding "{{" in v, keys in
// sorted order (the order the JSON of a document is written in); of annotations, only
// retrycap's.
func firstTemplate(v any, path string) (string, string, bool) {
	switch t := v.(type) {
	case string:
		if strings.Contains(t, "{{") {
			return path, t, true
		}
	case []any:
		for i, e := range t {
			if p, s, ok := firstTemplate(e, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, s, true
			}
		}
	case map[string]any:
		annotations := path == "metadata.annotations" || strings.HasSuffix(path, ".metadata.annotations")
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if annotations && !strings.HasPrefix(k, "retrycap.dev/") {
				// Other controllers' templates (Vault agent's agent-inject-template-*): real
				// values of a rendered object.
				continue
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			if p, s, ok := firstTemplate(t[k], p); ok {
				return p, s, true
			}
		}
	}
	return "", "", false
}

func (m *Manifests) count(c *map[string]int, kind string) {
	if *c == nil {
		*c = map[string]int{}
	}
	(*c)[kind]++
}

// ownAnnotations merges the retrycap annotations of a workload's own metadata (where `kubectl
// annotate deploy` puts them) into its pod template's, which win, with a warning either way.
func (r Reader) ownAnnotations(m *Manifests, src Source, w workload.Workload, own map[string]string) map[string]string {
	var keys []string
	for k := range own {
		if strings.HasPrefix(k, "retrycap.dev/") && k != annotations.RewrittenFrom {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return w.Annotations.Map()
	}
	sort.Strings(keys)
	out := make(map[string]string, w.Annotations.Len()+len(keys))
	maps.Insert(out, w.Annotations.All())
	for _, k := range keys {
		if !slices.Contains(workload.ReadAnnotations, k) {
			if _, ok := out[k]; !ok {
				out[k] = own[k] // not one retrycap reads: validate says so, wherever it is
			}
			continue
		}
		if v, ok := w.Annotations.Lookup(k); ok {
			m.warn(src, "%s: annotation %s is on both the %s's metadata (%q) and its pod template (%q): the pod template's wins", w, k, w.Kind, own[k], v)
			continue
		}
		m.warn(src, "%s: annotation %s is on the %s's own metadata: read, but it belongs on the pod template (%s.metadata.annotations)", w, k, w.Kind, templatePath(w.Kind))
		out[k] = own[k]
	}
	return out
}

// templatePath is where kind's pod template is: "spec.jobTemplate.spec.template" for a CronJob.
func templatePath(kind string) string {
	k, _ := workload.KindOf(kind)
	return k.TemplateField()
}

// repeatedMeshObject reports whether a mesh object (a VirtualService, a route, a MeshConfig, ...)
// was already read: the same group, kind, namespace and name, as when -f DIR holds Istio's
// bookinfo/networking files, which define VirtualService ratings in six of them. The mesh Set
// keeps the later one, as kubectl apply would; this says so, naming both places, and the summary
// counts the object once. Before, the earlier was dropped without a word and counted twice.
func (r Reader) repeatedMeshObject(m *Manifests, src Source, tm *typeMeta) bool {
	ns := tm.Metadata.Namespace
	if ns == "" && tm.Kind != "IngressClass" && tm.Kind != "Mesh" && tm.Kind != "MutatingWebhookConfiguration" { // cluster-scoped
		ns = r.namespace()
	}
	what := tm.Kind + " " + tm.Metadata.Name
	if ns != "" {
		what = tm.Kind + " " + ns + "/" + tm.Metadata.Name
	}
	key := "mesh/" + apiGroup(tm.APIVersion) + "/" + tm.Kind + "/" + ns + "/" + tm.Metadata.Name
	_, seen := m.Sources[key]
	laterWins(m, []struct{}(nil), key, what, src, func(struct{}) bool { return false })
	return seen
}

// ignored counts an object of a kind the graph does not read, and warns about retrycap
// annotations on it that would be lost.
func (r Reader) ignored(m *Manifests, src Source, tm *typeMeta, js []byte) {
	// A Gateway API Gateway is read as an Istio ambient waypoint (mesh/waypoint.go); Istio's own
	// networking.istio.io Gateway is not read. A networking.k8s.io Ingress and IngressClass are
	// read for ingress-nginx's retries (mesh/ingressnginx.go).
	if meshKinds[tm.Kind] || (tm.Kind == "Gateway" || tm.Kind == "Ingress" || tm.Kind == "IngressClass") && mesh.Reads(tm.APIVersion, tm.Kind) {
		if !r.repeatedMeshObject(m, src, tm) {
			m.count(&m.Summary.Mesh, tm.Kind)
		}
		return
	}
	if tm.Kind == "MutatingWebhookConfiguration" && apiGroup(tm.APIVersion) == mesh.GroupAdmission && mesh.IsIstioInjector(js) {
		// Istio's injector, whose webhooks' selectors decide which pods get its sidecar
		// (mesh/istiowebhooks.go): read, not "ignored".
		if !r.repeatedMeshObject(m, src, tm) {
			m.count(&m.Summary.Mesh, istioInjectorKind)
		}
		return
	}
	if tm.APIVersion == "v1" && tm.Kind == "ConfigMap" && mesh.IsMeshConfig(tm.Metadata.Namespace, tm.Metadata.Name, revLabels(tm, js)) {
		// Istio's MeshConfig (the default revision's, or a revision's istio-<rev>), whose default
		// retries the mesh Set reads (not "ignored").
		if !r.repeatedMeshObject(m, src, tm) {
			m.count(&m.Summary.Mesh, meshConfigKindOf(tm.Metadata.Name))
		}
		return
	}
	m.count(&m.Summary.Ignored, ignoredKind(tm))
	if tm.APIVersion == "v1" && tm.Kind == "ConfigMap" {
		ns := tm.Metadata.Namespace
		if ns == "" {
			ns = r.namespace()
		}
		if m.configMaps == nil {
			m.configMaps = map[string]int{}
		}
		m.configMaps[ns+"/"+tm.Metadata.Name]++
	}
	r.warnEnvoyFilterRetries(m, src, tm, js) // envoyfilter.go
	unread, ok := unreadKinds[apiGroup(tm.APIVersion)+"/"+tm.Kind]
	if !ok {
		return
	}
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Template    *corev1.PodTemplateSpec `json:"template"`
			JobTemplate *struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			} `json:"jobTemplate"`
		} `json:"spec"`
	}
	if json.Unmarshal(js, &o) != nil {
		return
	}
	found := map[string]bool{}
	for _, a := range []map[string]string{o.Metadata.Annotations, templateAnnotations(o.Spec.Template), jobTemplateAnnotations(o.Spec.JobTemplate)} {
		for k := range a {
			if strings.HasPrefix(k, "retrycap.dev/") {
				found[k] = true
			}
		}
	}
	if len(found) == 0 {
		return
	}
	keys := slices.Sorted(maps.Keys(found))
	m.warn(src, "%s: retrycap annotation(s) %s on a %s, which retrycap does not read (it reads Deployments, StatefulSets, DaemonSets, CronJobs, Jobs, ReplicaSets and bare Pods): not counted%s",
		r.ident(tm), strings.Join(keys, ", "), unread.what, unread.cluster)
}

// istioInjectorKind counts Istio's injector's MutatingWebhookConfigurations among the mesh objects.
const istioInjectorKind = "MutatingWebhookConfiguration (Istio injector)"

// meshConfigKind counts the ConfigMap istio-system/istio among the mesh objects.
const meshConfigKind = "ConfigMap istio-system/istio (MeshConfig)"

// revLabels are the labels of a ConfigMap that may be a revision's MeshConfig (istio-system/istio-*),
// read only there: typeMeta leaves labels out, so a label of the wrong type elsewhere is
// reported by the reader that reads it, naming the object.
func revLabels(tm *typeMeta, js []byte) map[string]string {
	if tm.Metadata.Namespace != mesh.IstioConfigNamespace || !strings.HasPrefix(tm.Metadata.Name, mesh.IstioConfigName+"-") {
		return nil
	}
	var o struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &o) != nil {
		return nil
	}
	return o.Metadata.Labels
}

// meshConfigKindOf counts a MeshConfig ConfigMap of that name (a revision's: istio-canary).
func meshConfigKindOf(name string) string {
	return "ConfigMap " + mesh.IstioConfigNamespace + "/" + name + " (MeshConfig)"
}

func templateAnnotations(t *corev1.PodTemplateSpec) map[string]string {
	if t == nil {
		return nil
	}
	return t.Annotations
}

func jobTemplateAnnotations(t *struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}) map[string]string {
	if t == nil {
		return nil
	}
	return t.Spec.Template.Annotations
}

// validate reports a workload's invalid retrycap annotations, whichever policy selects it, and
// warns of the ports its upstreams drop and of the retrycap.dev/ keys it does not read: the
// checks the admission gate makes (package workload's), so that both say the same of the same
// object. A miscased key is malformed (its attempts would not be counted), any other unknown key
// ignored, with a warning.
func validate(m *Manifests, src Source, w workload.Workload) []error {
	var errs []error
	for _, err := range workload.AnnotationErrors(w) {
		errs = append(errs, &InputError{src, err})
	}
	for _, msg := range workload.UpstreamsWarnings(w) {
		m.warn(src, "%s", msg)
	}
	_, unknown := workload.StrayKeys(w)
	for _, msg := range unknown {
		m.warn(src, "%s", msg)
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
// would enforce on them, to the spec of a policy named name; a cluster policy's entrypoints are
// "service.namespace".
func defaultPolicy(name string, spec *v1alpha1.RetryPolicySpec, cluster bool) error {
	if name == "" {
		return errors.New("metadata.name is missing")
	}
	if spec.MaxAmplification < defaults.MaxAmplificationMin || spec.MaxAmplification > defaults.MaxAmplificationMax {
		return fmt.Errorf("spec.maxAmplification must be %d..%d, got %d", defaults.MaxAmplificationMin, defaults.MaxAmplificationMax, spec.MaxAmplification)
	}
	if spec.Enforcement == "" {
		spec.Enforcement = defaults.Enforcement
	}
	switch spec.Enforcement {
	case v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit:
	default:
		return fmt.Errorf("spec.enforcement must be Reject, Rewrite or Audit, got %q", spec.Enforcement)
	}
	if spec.Retry.DefaultAttempts == 0 {
		spec.Retry.DefaultAttempts = defaults.Attempts
	}
	if a := spec.Retry.DefaultAttempts; a < defaults.AttemptsMin || a > defaults.AttemptsMax {
		return fmt.Errorf("spec.retry.defaultAttempts must be %d..%d, got %d", defaults.AttemptsMin, defaults.AttemptsMax, a)
	}
	for i := range spec.Entrypoints {
		e := &spec.Entrypoints[i]
		if e.ClientAttempts == 0 {
			e.ClientAttempts = defaults.ClientAttempts
		}
		if e.ClientAttempts < defaults.AttemptsMin || e.ClientAttempts > defaults.AttemptsMax {
			return fmt.Errorf("spec.entrypoints[%d].clientAttempts must be %d..%d, got %d", i, defaults.AttemptsMin, defaults.AttemptsMax, e.ClientAttempts)
		}
		if cluster {
			if reason := clusterEntrypointReason(e.Service); reason != "" {
				return fmt.Errorf("spec.entrypoints[%d].service %q: %s", i, e.Service, reason)
			}
			continue
		}
		if reason := annotations.ValidateLabel(e.Service); reason != "" {
			return fmt.Errorf("spec.entrypoints[%d].service %q: %s", i, e.Service, reason)
		}
	}
	return nil
}

// summary is what was read, an ingress-nginx controller's ConfigMap counted as read (its keys
// set the Ingresses' tries: "ConfigMap (ingress-nginx)") rather than ignored, wherever in the
// input it came before the controller naming it.
func (m *Manifests) summary() Summary {
	sum := m.Summary
	if m.mesh == nil || len(m.configMaps) == 0 {
		return sum
	}
	moved := 0
	for _, ref := range m.mesh.IngressNginxConfigMaps() {
		moved += m.configMaps[ref]
	}
	if moved == 0 {
		return sum
	}
	sum.Ignored, sum.Mesh = maps.Clone(sum.Ignored), maps.Clone(sum.Mesh)
	if sum.Ignored["ConfigMap"] -= moved; sum.Ignored["ConfigMap"] <= 0 {
		delete(sum.Ignored, "ConfigMap")
	}
	if len(sum.Ignored) == 0 {
		sum.Ignored = nil
	}
	if sum.Mesh == nil {
		sum.Mesh = map[string]int{}
	}
	sum.Mesh["ConfigMap (ingress-nginx)"] += moved
	return sum
}

// Analyze reports on every policy read, sorted by namespace and name, with what was read, the
// warnings, and why nothing (or not everything) was checked.
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
		r, a := workload.Analyze(workload.ForRetryPolicy(p), m.Workloads, m.mesh, m.Services...)
		prs = append(prs, m.policyReport(r, a, "RetryPolicy/"+p.Namespace+"/"+p.Name))
	}
	cprs, unchecked := m.analyzeClusterPolicies()
	prs = append(prs, cprs...)
	rep := NewReport(prs)
	sum := m.summary()
	rep.Summary = &sum
	rep.warnings = append(rep.warnings, m.Warnings...)
	rep.warnings = append(rep.warnings, m.strayRoutes()...)
	unread := map[string]int{}
	n := 0
	for k, c := range sum.Mesh {
		if !meshRead[k] && !strings.HasSuffix(k, " (MeshConfig)") && k != "ConfigMap (ingress-nginx)" && k != istioInjectorKind {
			unread[k] = c
			n += c
		}
	}
	if n > 0 {
		msg := fmt.Sprintf("%d mesh object(s) read (%s): the retries they configure are not counted by this version", n, kindCounts(unread))
		if len(unread) == 1 && unread["DestinationRule"] == n {
			// Not "the retries they configure": a DestinationRule sets no tries (istio/istio
			// pilot/pkg/networking/core/cluster_traffic_policy.go: connectionPool.http.maxRetries
			// is Envoy's circuit breaker max_retries, retryBudget its retry budget), and the
			// line read as a layer missed on every bookinfo-like input.
			msg = fmt.Sprintf("%d DestinationRule(s) read, not counted: a DestinationRule sets no tries per request (its connectionPool.http.maxRetries and retryBudget cap the retries in flight to a host, which can only lower what a chain sees)", n)
		}
		rep.warnings = append(rep.warnings, Warning{Source: Source{File: "(input)"}, Msg: msg})
	}
	for _, w := range rep.warnings {
		rep.Warnings = append(rep.Warnings, w.String())
	}
	if len(ps) == 0 && len(m.ClusterPolicies) == 0 {
		rep.Unchecked = append(rep.Unchecked, "no RetryPolicy (retrycap.dev/v1alpha1) in the input: nothing to check against")
	}
	rep.Unchecked = append(rep.Unchecked, unchecked...)
	for i := range rep.Policies {
		p := &rep.Policies[i]
		name := p.Title()
		var why string
		switch {
		case p.selectorErr != "":
			// Not "selects no workload": that reads as a selector that matched nothing.
			why = p.selectorErr + ": the policy selects nothing, nothing checked"
		case p.Workloads == 0 && p.Kind == KindCluster:
			why = fmt.Sprintf("%s selects no workload (%s): nothing checked", name, p.scopeText)
		case p.Workloads == 0:
			why = fmt.Sprintf("%s selects no workload (in namespace %s; a policy selects only workloads of its own namespace): nothing checked", name, p.Namespace)
			why += m.unnamespacedHint(p.Namespace)
		case p.WithUpstreams == 0 && len(p.Layers) == 0:
			// A gateway or mesh layer on an entrypoint's client attempts is something checked
			// (a route's retries alone can be over the cap); nothing at all contributes here.
			why = fmt.Sprintf("%s: none of its %d workload(s) declares %s, and no gateway or mesh route retries into them: no call edge to check (retrycap discover proposes the annotations, from these manifests with -f or from telemetry with --prometheus-url)", name, p.Workloads, annotations.Upstreams)
		case len(p.Errors) > 0 && p.WithinCap:
			// An edge whose tries could not be read (an AWS_MAX_ATTEMPTS of "three") was taken
			// at one try: "within the cap" would be a guess. Over the cap stays over (a lower
			// bound is enough).
			why = fmt.Sprintf("%s: %d error(s) in its workloads (%s): the tries of those edges are unknown, \"within the cap\" is not known", name, len(p.Errors), p.Errors[0])
		}
		if why != "" {
			rep.Unchecked = append(rep.Unchecked, why)
			p.markNotChecked(why)
			rep.WithinCap = false
		}
	}
	return rep
}

// unnamespacedRoute is a route or retry object read without metadata.namespace.
type unnamespacedRoute struct {
	src            Source
	kind, ns, name string
}

// routeKinds are the kinds whose retries land on Services named from the object's namespace.
var routeKinds = map[string]bool{"VirtualService": true, "HTTPRoute": true, "GRPCRoute": true, "Ingress": true, "ServiceProfile": true,
	"ServiceRouter": true, "BackendTrafficPolicy": true, "MeshRetry": true, "Resiliency": true}

// strayRoutes warns of each route or retry object that names no namespace and was read into one
// where the input holds no Service and no workload, while it holds some elsewhere: its short
// hosts name Services of that namespace, so it counts for none of the input's. DeathStarBench's
// mediaMicroservices ships its ingress VirtualService without a namespace beside workloads
// that name theirs: without -n, its route was silently nowhere (before, "no gateway or mesh
// route retries into them").
func (m *Manifests) strayRoutes() []Warning {
	if len(m.unnamespacedRoutes) == 0 {
		return nil
	}
	held := map[string]bool{}
	for _, s := range m.Services {
		held[s.Namespace] = true
	}
	for _, w := range m.Workloads {
		held[w.Namespace] = true
	}
	if len(held) == 0 {
		return nil
	}
	nss := slices.Sorted(maps.Keys(held))
	where := strings.Join(nss, ", ")
	if len(nss) > 3 {
		where = strings.Join(nss[:3], ", ") + fmt.Sprintf(" and %d more", len(nss)-3)
	}
	var out []Warning
	for _, r := range m.unnamespacedRoutes {
		if held[r.ns] {
			continue
		}
		out = append(out, Warning{Source: r.src, Msg: fmt.Sprintf("%s %s/%s names no metadata.namespace and was read in namespace %s, where the input holds no Service and no workload (they are in %s): its hosts name Services of %s, so it counts for none of them; if you apply it with kubectl apply -n NAMESPACE, pass -n NAMESPACE (--namespace) to analyze",
			r.kind, r.ns, r.name, r.ns, where, r.ns)})
	}
	return out
}

// unnamespacedHint says, for a policy of namespace ns that selects no workload, where the
// workloads without a namespace went: manifests such as Istio's bookinfo carry none, and
// `kubectl apply -n NS` puts them in NS, which analyze cannot know without -n.
func (m *Manifests) unnamespacedHint(ns string) string {
	var parts []string
	for _, other := range slices.Sorted(maps.Keys(m.unnamespaced)) {
		if other != ns {
			parts = append(parts, fmt.Sprintf("%d workload(s) without metadata.namespace were read in namespace %s", m.unnamespaced[other], other))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ") + ": if you apply them with kubectl apply -n " + ns + ", pass -n " + ns + " (--namespace) to analyze"
}

// policyReport is the report of r and a with where its policy (at Sources[key]) and each node's
// first selected workload were read.
func (m *Manifests) policyReport(r *workload.Result, a *graph.Analysis, key string) PolicyReport {
	pr := FromResult(r, a)
	pr.source = m.Sources[key]
	pr.serviceSource = map[string]Source{}
	for _, w := range r.Selected { // sorted: the first workload of a service
		if svc := r.ServiceOf[w.Key()]; svc != "" {
			if _, ok := pr.serviceSource[svc]; !ok {
				pr.serviceSource[svc] = m.Sources[w.Key()]
			}
		}
		// A Service's node, and a fix that names the workload ("Deployment ns/name: ...").
		for _, n := range r.Nodes(w.Key()) {
			if _, ok := pr.serviceSource[n]; !ok {
				pr.serviceSource[n] = m.Sources[w.Key()]
			}
		}
		pr.serviceSource[w.String()] = m.Sources[w.Key()]
	}
	return pr
}

// kindCounts renders counts by kind, sorted by kind: "ConfigMap 2, Namespace 1".
func kindCounts(c map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}
