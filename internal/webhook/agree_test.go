package webhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/gate"
	"github.com/retrycap/retrycap/internal/jsonfield"
	"github.com/retrycap/retrycap/internal/workload"
)

// TestGateAgreesWithAnalyze is the differential test of the two readers of a workload's retrycap
// annotations: for each workload object of analyze's inputs (every manifest file under
// internal/cli/testdata) and of a table of hostile workloads (every kind; stray, miscased and
// look-alike keys; bad inject values; bad upstreams grammar; invisible and look-alike characters;
// huge values; annotations on the own metadata and on a CronJob's job template), the object as
// the gate decodes an admission request (decodeWorkload) is judged by gate.Decide under a policy
// that selects it, and under one that selects nothing, and the same object is read by analyze
// with the same policy. The gate refuses exactly when analyze reports an error
// about it, and its message is one of analyze's; its warnings are analyze's, message for message
// (with analyze's errors among them when no policy selects the workload, which is admitted),
// but for the placement warnings of the own metadata, whose words differ by design (analyze reads
// such an annotation, the cluster does not): those must name the same workload and key.
//
// One difference is by design: an annotation on both the own metadata and the pod template
// with the same value (nothing lost) is noted by analyze and not by the gate. Objects the API
// server refuses before any webhook (an unknown field, no name) are not compared.
func TestGateAgreesWithAnalyze(t *testing.T) {
	type input struct{ name, yaml string }
	var inputs []input
	err := filepath.WalkDir("../cli/testdata", func(f string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(f, ".yaml") && !strings.HasSuffix(f, ".yml") && !strings.HasSuffix(f, ".json") {
			return err
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		inputs = append(inputs, input{f, string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fromFiles := len(inputs)
	if fromFiles < 10 {
		t.Fatalf("%d input files of analyze's: the glob finds nothing to compare", fromFiles)
	}
	for _, h := range hostileWorkloads {
		inputs = append(inputs, input{"table: " + h.name, h.yaml})
	}
	compared, skipped := 0, 0
	for _, in := range inputs {
		for i, raw := range objectsOf(t, in.yaml) {
			ok, why := agree(t, fmt.Sprintf("%s: object %d", in.name, i+1), raw)
			if ok {
				compared++
			} else if why != "" {
				skipped++
				t.Logf("%s: object %d: not compared: %s", in.name, i+1, why)
			}
		}
	}
	// "Nothing was checked" is a failure: every row of the table but the owned Pod is a workload
	// the gate sees, and analyze's inputs hold some two hundred.
	if want := len(hostileWorkloads) + 200; compared < want {
		t.Fatalf("compared %d workloads (skipped %d), want at least %d", compared, skipped, want)
	}
	t.Logf("compared %d workloads, skipped %d", compared, skipped)
}

// objectsOf splits a YAML stream into its objects as JSON, a List's items each; a document that
// is not a YAML object (a UTF-16 file, junk) is left out: analyze's own tests cover those.
func objectsOf(t *testing.T, data string) [][]byte {
	t.Helper()
	var out [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			return out
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil || !bytes.HasPrefix(bytes.TrimSpace(js), []byte("{")) {
			continue
		}
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if json.Unmarshal(js, &list) == nil && strings.HasSuffix(list.Kind, "List") {
			for _, it := range list.Items {
				out = append(out, it)
			}
			continue
		}
		out = append(out, js)
	}
}

var (
	// The placement warnings on a workload's own metadata: the gate's and analyze's two.
	gateOwn        = regexp.MustCompile(`^(\S+ \S+): annotation (\S+)=".*" is on the \S+'s own metadata, which retrycap does not read; put it on \S+$`)
	analyzeOwn     = regexp.MustCompile(`^(\S+ \S+): annotation (\S+) is on the \S+'s own metadata: read, but it belongs on the pod template \(\S+\)$`)
	analyzeOnBoth  = regexp.MustCompile(`^(\S+ \S+): annotation (\S+) is on both the \S+'s metadata \(".*"\) and its pod template \(".*"\): the pod template's wins$`)
	agreeNamespace = "shop"
)

// agree compares the gate and analyze on one object (JSON); false with the reason when the
// object is not one to compare (not a workload, refused by the API server before any webhook),
// false with no reason for an object neither reads (a kind retrycap does not read).
func agree(t *testing.T, what string, raw []byte) (bool, string) {
	t.Helper()
	var tm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return false, "not an object: " + err.Error()
	}
	group, _, _ := strings.Cut(tm.APIVersion, "/")
	if !strings.Contains(tm.APIVersion, "/") {
		group = ""
	}
	k, ok := workload.KindOfGroup(group, tm.Kind)
	if !ok {
		return false, ""
	}
	if err := jsonfield.Decode(raw, k.New()); err != nil {
		return false, "the API server refuses it: " + err.Error()
	}
	if tm.Metadata.Name == "" {
		return false, "the API server refuses it: no metadata.name"
	}
	// One namespace for both: a policy there selects every workload.
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	obj["metadata"].(map[string]any)["namespace"] = agreeNamespace
	raw, _ = json.Marshal(obj)

	policy := func(name string, selector *metav1.LabelSelector) *v1alpha1.RetryPolicy {
		return &v1alpha1.RetryPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "retrycap.dev/v1alpha1", Kind: "RetryPolicy"},
			ObjectMeta: metav1.ObjectMeta{Namespace: agreeNamespace, Name: name},
			Spec: v1alpha1.RetryPolicySpec{Selector: selector, MaxAmplification: defaults.MaxAmplificationMax, Enforcement: v1alpha1.EnforcementAudit,
				Retry: v1alpha1.RetrySettings{DefaultAttempts: 1}}}
	}

	// The gate, on the object as an admission request carries it.
	dec, err := decodeWorkload(metav1.GroupVersionKind{Group: group, Version: k.Version, Kind: tm.Kind}, raw)
	if err != nil {
		t.Errorf("%s: the gate cannot decode what the API server accepts: %v", what, err)
		return false, "decode error"
	}

	// analyze, on the same object with the same policy: the errors of what it read, the errors
	// of the policy's graph, the warnings.
	analyzeWith := func(p *v1alpha1.RetryPolicy) (readErrs, graphErrs, warns []string) {
		pjs, _ := json.Marshal(p)
		m := analyze.NewManifests()
		for _, err := range (analyze.Reader{}).Read(m, "in.yaml", strings.NewReader(string(pjs)+"\n---\n"+string(raw))) {
			var ie *analyze.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("%s: analyze: %v", what, err)
			}
			readErrs = append(readErrs, ie.Err.Error())
		}
		for _, w := range m.Warnings {
			warns = append(warns, w.Msg)
		}
		for _, pr := range m.Analyze().Policies {
			graphErrs = append(graphErrs, pr.Errors...)
		}
		return readErrs, graphErrs, warns
	}
	if !dec.ok {
		// Owned by a controller: no workload for either.
		readErrs, _, warns := analyzeWith(policy("all", nil))
		if len(readErrs)+len(warns) > 0 {
			t.Errorf("%s: the gate sees no workload (owned), analyze says:\n errors %q\n warnings %q", what, readErrs, warns)
		}
		return false, "owned by a controller (both: not a workload)"
	}
	w := dec.workload.String()

	// The warnings, the placement ones by workload and key.
	norm := func(msgs []string, own ...*regexp.Regexp) []string {
		var out []string
		for _, msg := range msgs {
			placed := false
			for _, re := range own {
				if sm := re.FindStringSubmatch(msg); sm != nil {
					if re == analyzeOnBoth && dec.own[sm[2]] == dec.workload.Annotations.Get(sm[2]) {
						placed = true // the difference by design: the same value in both places
						break
					}
					out = append(out, "own metadata: "+sm[1]+" "+sm[2])
					placed = true
					break
				}
			}
			if !placed {
				out = append(out, msg)
			}
		}
		slices.Sort(out)
		return out
	}
	decide := func(p *v1alpha1.RetryPolicy) gate.Decision {
		d := gate.Decide(gate.Input{Policies: []*v1alpha1.RetryPolicy{p}, Incoming: dec.workload,
			ObjectAnnotations: dec.own, JobTemplateAnnotations: dec.jobTemplate})
		if len(d.PolicyErrors) > 0 {
			t.Fatalf("%s: %v", what, d.PolicyErrors)
		}
		return d
	}

	// Selected: the gate refuses what analyze calls an error, and warns of what it warns of.
	all := policy("all", nil)
	readErrs, graphErrs, warns := analyzeWith(all)
	aErrs := append(readErrs, graphErrs...)
	d := decide(all)
	switch {
	case !d.Allowed && len(aErrs) == 0:
		t.Errorf("%s: the gate refuses %s, analyze reports no error:\n gate: %s\n analyze warnings: %q", what, w, d.Message, warns)
	case d.Allowed && len(aErrs) > 0:
		t.Errorf("%s: the gate admits %s, analyze reports errors:\n analyze: %q\n gate warnings: %q", what, w, aErrs, d.Warnings)
	case !d.Allowed && !slices.Contains(aErrs, d.Message):
		t.Errorf("%s: the gate's refusal of %s is none of analyze's errors:\n gate:    %s\n analyze: %q", what, w, d.Message, aErrs)
	}
	if g, a := norm(d.Warnings, gateOwn), norm(warns, analyzeOwn, analyzeOnBoth); !slices.Equal(g, a) {
		t.Errorf("%s: warnings of %s differ:\n gate:    %q\n analyze: %q", what, w, g, a)
	}

	// Selected by no policy: the gate admits it, and says as warnings what analyze says of its
	// annotations (its errors among them).
	none := policy("none", &metav1.LabelSelector{MatchLabels: map[string]string{"retrycap-test/selected": "never"}})
	readErrs, _, warns = analyzeWith(none)
	d = decide(none)
	if !d.Allowed {
		t.Errorf("%s: the gate refuses %s, which no policy selects: %s", what, w, d.Message)
	}
	if g, a := norm(d.Warnings, gateOwn), norm(append(warns, readErrs...), analyzeOwn, analyzeOnBoth); !slices.Equal(g, a) {
		t.Errorf("%s: selected by no policy, what is said of %s differs:\n gate:    %q\n analyze: %q", what, w, g, a)
	}
	return true, ""
}

// hostileWorkloads are workloads a user's `kubectl apply` can send, each of which the gate and
// analyze must judge alike (TestGateAgreesWithAnalyze); the envtest suite sends some of them
// through the real API server.
var hostileWorkloads = []struct{ name, yaml string }{
	{"stray and miscased keys on the template", deploymentYAML("web", `{"retrycap.dev/upstream": "payment=9", "retrycap.dev/Upstreams": "payment=9", "retrycap.dev/upstreams": "payment=1"}`, "")},
	{"a miscased key on the own metadata", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=1"}`, `{"retrycap.dev/Upstreams": "payment=9"}`)},
	{"a zero-width space in a key", deploymentYAML("web", `{"retrycap.dev/up\u200bstreams": "payment=9"}`, "")},
	{"a homoglyph in a key, on the own metadata", deploymentYAML("web", `{}`, `{"retrycap.dev/upstre\u0430ms": "payment=9"}`)},
	{"a homoglyph in the key's prefix (not retrycap's)", deploymentYAML("web", `{"retrycap.d\u0435v/upstreams": "payment=9"}`, "")},
	{"an unknown key on the own metadata", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=1"}`, `{"retrycap.dev/retries": "3"}`)},
	{"upstreams on the own metadata only", deploymentYAML("web", `{}`, `{"retrycap.dev/upstreams": "payment=3"}`)},
	{"malformed upstreams on the own metadata only", deploymentYAML("web", `{}`, `{"retrycap.dev/upstreams": "payment=0"}`)},
	{"different values in both places", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=1"}`, `{"retrycap.dev/upstreams": "payment=3"}`)},
	{"the same value in both places", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=1"}`, `{"retrycap.dev/upstreams": "payment=1"}`)},
	{"inject yes", deploymentYAML("web", `{"retrycap.dev/inject": "yes"}`, "")},
	{"inject True", deploymentYAML("web", `{"retrycap.dev/inject": "True"}`, "")},
	{"inject empty", deploymentYAML("web", `{"retrycap.dev/inject": ""}`, "")},
	{"inject with a blank", deploymentYAML("web", `{"retrycap.dev/inject": " true"}`, "")},
	{"inject yes on the own metadata", deploymentYAML("web", `{}`, `{"retrycap.dev/inject": "yes"}`)},
	{"upstreams: a blank in a name", deploymentYAML("web", `{"retrycap.dev/upstreams": "pay ment=3"}`, "")},
	{"upstreams: zero attempts", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=0"}`, "")},
	{"upstreams: 101 attempts", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=101"}`, "")},
	{"upstreams: calls 0", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=3*0"}`, "")},
	{"upstreams: an empty entry", deploymentYAML("web", `{"retrycap.dev/upstreams": "a=1,,b=2"}`, "")},
	{"upstreams: a trailing comma", deploymentYAML("web", `{"retrycap.dev/upstreams": "a=1,"}`, "")},
	{"upstreams: a name twice", deploymentYAML("web", `{"retrycap.dev/upstreams": "a=1, a=2"}`, "")},
	{"upstreams: a port dropped", deploymentYAML("web", `{"retrycap.dev/upstreams": "cartservice:7070=3"}`, "")},
	{"upstreams: a homoglyph (Cyrillic a)", deploymentYAML("web", `{"retrycap.dev/upstreams": "p\u0430yment=3"}`, "")},
	{"upstreams: a zero-width space in a name", deploymentYAML("web", `{"retrycap.dev/upstreams": "pay\u200bment=3"}`, "")},
	{"upstreams: a zero-width space after a number", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=3\u200b"}`, "")},
	{"upstreams: a no-break space", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=3\u00a0"}`, "")},
	{"upstreams: a right-to-left override", deploymentYAML("web", `{"retrycap.dev/upstreams": "\u202epayment=3"}`, "")},
	{"upstreams: full-width digits", deploymentYAML("web", `{"retrycap.dev/upstreams": "payment=\uff13"}`, "")},
	{"a name that is no DNS-1123 label, the service by default", deploymentYAML("web.v2", `{"retrycap.dev/upstreams": "payment=2"}`, "")},
	{"service: upper case", deploymentYAML("web", `{"retrycap.dev/service": "Web"}`, "")},
	{"service: a zero-width space", deploymentYAML("web", `{"retrycap.dev/service": "we\u200bb"}`, "")},
	{"service: a homoglyph", deploymentYAML("web", `{"retrycap.dev/service": "w\u0435b"}`, "")},
	{"service: 64 characters", deploymentYAML("web", `{"retrycap.dev/service": "`+strings.Repeat("s", 64)+`"}`, "")},
	{"many upstreams", deploymentYAML("web", `{"retrycap.dev/upstreams": "`+manyUpstreams(2000, 2)+`"}`, "")},
	{"a huge malformed token", deploymentYAML("web", `{"retrycap.dev/upstreams": "`+strings.Repeat("p", 200000)+`=0"}`, "")},
	{"a huge unknown key's value", deploymentYAML("web", `{"retrycap.dev/x": "`+strings.Repeat("x", 200000)+`"}`, "")},
	{"a huge value on the own metadata", deploymentYAML("web", `{}`, `{"retrycap.dev/upstreams": "`+strings.Repeat("q", 200000)+`=3"}`)},
	{"a huge inject value", deploymentYAML("web", `{"retrycap.dev/inject": "`+strings.Repeat("y", 200000)+`"}`, "")},
	{"a bare Pod", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "annotations": {"retrycap.dev/upstreams": "payment=0", "retrycap.dev/upstream": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}`},
	{"a bare Pod, inject yes", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "annotations": {"retrycap.dev/inject": "yes"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}`},
	{"a Pod a ReplicaSet owns", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-x", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "1", "controller": true}], "annotations": {"retrycap.dev/upstreams": "payment=0"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}`},
	{"a Job", `{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "annotations": {"retrycap.dev/upstreams": "payment=3"}}, "spec": {"template": {"metadata": {"annotations": {"retrycap.dev/Inject": "true"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}`},
	{"a CronJob, annotations on its job template", `{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"}, "spec": {"schedule": "@daily", "jobTemplate": {"metadata": {"annotations": {"retrycap.dev/upstreams": "billing=9", "retrycap.dev/Upstreams": "x", "retrycap.dev/inject": "yes"}}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}`},
	{"a CronJob, a huge value on its job template", `{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"}, "spec": {"schedule": "@daily", "jobTemplate": {"metadata": {"annotations": {"retrycap.dev/upstreams": "` + strings.Repeat("b", 200000) + `"}}, "spec": {"template": {"metadata": {"annotations": {"retrycap.dev/upstreams": "billing:80=2"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}`},
	{"a CronJob, all three places", `{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "annotations": {"retrycap.dev/upstreams": "billing=5"}}, "spec": {"schedule": "@daily", "jobTemplate": {"metadata": {"annotations": {"retrycap.dev/upstreams": "billing=9"}}, "spec": {"template": {"metadata": {"annotations": {"retrycap.dev/upstreams": "billing=1"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}`},
	{"a standalone ReplicaSet", `{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}, "annotations": {"retrycap.dev/upstreams": "x=1,,y=2"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}`},
	{"a StatefulSet", `{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "annotations": {"retrycap.dev/service": "d b"}}, "spec": {"serviceName": "db", "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}, "annotations": {"retrycap.dev/upstreams": "disk=2"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}`},
	{"a DaemonSet", `{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}, "annotations": {"retrycap.dev/SERVICE": "agent", "retrycap.dev/upstreams": "collector=2"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}`},
}

// deploymentYAML is a Deployment (JSON, which is YAML) with template and own annotations (JSON
// objects; own "" for none).
func deploymentYAML(name, template, own string) string {
	ownField := ""
	if own != "" {
		ownField = `, "annotations": ` + own
	}
	return `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "` + name + `"` + ownField + `}, "spec": {"selector": {"matchLabels": {"app": "` + name +
		`"}}, "template": {"metadata": {"labels": {"app": "` + name + `"}, "annotations": ` + template + `}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}`
}

// manyUpstreams is n distinct upstreams of attempts each, "up-0=2, up-1=2, ...".
func manyUpstreams(n, attempts int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("up-%d=%d", i, attempts)
	}
	return strings.Join(parts, ", ")
}
