package inject

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
	"github.com/retrycap/retrycap/internal/workload"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.injected.yaml golden files")

// testConfig is the injector configuration of every golden case.
var testConfig = Config{ProxyImage: "retrycap/retrycap-proxy:v0.1.0", ExcludedNamespaces: []string{"kube-system", "retrycap-system"}}

// goldenCase is one testdata/<name>.yaml: the pod (the first Pod document), and the rest of the
// namespace as further documents: its Namespace (for the labels), RetryPolicies, and workloads
// (a Job a CronJob owns is no workload, as in the index: Input.CronJobOf knows its owner); and for ClusterRetryPolicies the other namespaces and their workloads.
type goldenCase struct {
	name  string
	input Input
}

func loadCases(t *testing.T) []goldenCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	for _, f := range files {
		if strings.HasSuffix(f, ".injected.yaml") {
			continue
		}
		in, err := readInput(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, goldenCase{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), input: in})
	}
	if len(cases) == 0 {
		t.Fatal("no golden cases in testdata")
	}
	return cases
}

func readInput(path string) (Input, error) {
	scheme := retrycapscheme.New()
	decode := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode
	data, err := os.ReadFile(path)
	if err != nil {
		return Input{}, err
	}
	var in Input
	nsLabels := map[string]map[string]string{}
	var cluster []*v1alpha1.ClusterRetryPolicy
	var all []workload.Workload
	jobCronJobs := map[string]string{} // Job -> the CronJob that controls it (the pod's namespace's)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return in, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decode(doc, nil, nil)
		if err != nil {
			return in, fmt.Errorf("document %d: %w", i, err)
		}
		if pod, ok := obj.(*corev1.Pod); ok && in.Pod == nil {
			in.Pod = pod
			continue
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			nsLabels[o.Name] = o.Labels
		case *v1alpha1.RetryPolicy:
			in.Policies = append(in.Policies, *o)
		case *corev1.LimitRange:
			in.LimitRanges = append(in.LimitRanges, *o)
		case *v1alpha1.ClusterRetryPolicy:
			cluster = append(cluster, o)
		default:
			// A Job a CronJob made (covered by its owner) is context, as in the cluster: the
			// index holds its CronJob, not it.
			if kind, meta, _, ok := workload.TemplateOf(obj); ok && workload.Covered(kind, meta) {
				if c := metav1.GetControllerOf(meta); kind == workload.KindJob && c.Kind == workload.KindCronJob {
					jobCronJobs[meta.Name] = c.Name
				}
				continue
			}
			w, ok := workload.FromObject(obj)
			if !ok {
				return in, fmt.Errorf("document %d: %T is neither the pod, a Namespace, a RetryPolicy, a ClusterRetryPolicy nor a workload", i, obj)
			}
			all = append(all, w)
		}
	}
	if in.Pod == nil || in.Pod.Namespace == "" {
		return in, errors.New("the first Pod document, with a namespace, is the input")
	}
	// As the pod injector reads them: the namespace's own workloads for its RetryPolicies, the
	// cluster policies whose scope has the pod's namespace, and every workload for those.
	in.NamespaceLabels = nsLabels[in.Pod.Namespace]
	has := map[string]bool{}
	for _, w := range all {
		if w.Namespace == in.Pod.Namespace {
			in.Workloads = append(in.Workloads, w)
			has[w.Kind+"/"+w.Name] = true
		}
	}
	in.CronJobOf = func(job string) (string, bool) {
		return workload.CronJobOfJob(job, jobCronJobs[job], func(kind, name string) bool { return has[kind+"/"+name] })
	}
	for _, p := range cluster {
		scope, err := workload.NewClusterScope(p, nsLabels)
		if err != nil {
			return in, err
		}
		if scope.Has(in.Pod.Namespace) {
			in.ClusterPolicies = append(in.ClusterPolicies, ClusterPolicy{Policy: p, Scope: scope})
			in.ClusterWorkloads = all
		}
	}
	return in, nil
}

// render is what a golden file holds: comment lines with the outcome, then the pod as stored.
func render(d Decision) ([]byte, error) {
	var b bytes.Buffer
	if d.Injected {
		fmt.Fprintf(&b, "# injected: %s\n", d.Policy)
	} else {
		fmt.Fprintf(&b, "# skipped: %s\n", d.Skip)
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "# warning: %s\n", w)
	}
	pod := d.Pod.DeepCopy()
	pod.APIVersion, pod.Kind = "v1", "Pod"
	data, err := yaml.Marshal(pod)
	if err != nil {
		return nil, err
	}
	b.Write(data)
	return b.Bytes(), nil
}

func TestGolden(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.name, func(t *testing.T) {
			before := c.input.Pod.DeepCopy()
			d := Decide(testConfig, c.input)
			if !reflect.DeepEqual(before, c.input.Pod) {
				t.Fatal("Decide modified its input pod")
			}
			if d.Injected == (d.Skip != nil) {
				t.Fatalf("Injected = %t with Skip = %v", d.Injected, d.Skip)
			}
			got, err := render(d)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", c.name+".injected.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/inject -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs (go test ./internal/inject -update rewrites it); got:\n%s", golden, got)
			}

			// Idempotent: the stored pod, admitted again (a re-creation from a dump, a second
			// webhook call), is left exactly as it is.
			again := c.input
			again.Pod = d.Pod
			d2 := Decide(testConfig, again)
			if d.Injected {
				if d2.Injected || d2.Skip.Reason != AlreadyInjected {
					t.Errorf("second injection: injected %t, skip %v; want AlreadyInjected", d2.Injected, d2.Skip)
				}
			}
			if !reflect.DeepEqual(d2.Pod, d.Pod) {
				t.Errorf("a second Decide changed the pod")
			}
		})
	}
}
