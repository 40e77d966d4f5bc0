package workload

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
)

func deploy(ns, name, upstreams string, lbls map[string]string) Workload {
	ann := map[string]string{}
	if upstreams != "" {
		ann[annotations.Upstreams] = upstreams
	}
	return Workload{Kind: KindDeployment, Namespace: ns, Name: name, Labels: PairsOf(lbls), Annotations: PairsOf(ann)}
}

func policy(ns, name string, cap int32, eps ...v1alpha1.Entrypoint) *v1alpha1.RetryPolicy {
	return &v1alpha1.RetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.RetryPolicySpec{MaxAmplification: cap, Entrypoints: eps, Retry: v1alpha1.RetrySettings{DefaultAttempts: 1}},
	}
}

func TestFromObject(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{annotations.Upstreams: "db=2"}}}
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "x", Labels: map[string]string{"not": "template"}}
	ctrl := true
	tests := []struct {
		obj  runtime.Object
		ok   bool
		kind string
	}{
		{&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl}}, true, KindDeployment},
		{&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Template: tmpl}}, true, KindStatefulSet},
		{&appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: tmpl}}, true, KindDaemonSet},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", Labels: tmpl.Labels, Annotations: tmpl.Annotations}}, true, KindPod},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", Labels: tmpl.Labels, OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "x-1", Controller: &ctrl}}}}, false, ""},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", Labels: tmpl.Labels, Annotations: tmpl.Annotations, OwnerReferences: []metav1.OwnerReference{{Kind: "ConfigMap", Name: "c"}}}}, true, KindPod},
		{&batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tmpl}}, true, KindJob},
		{&batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, true, KindCronJob},
		{&appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Template: tmpl}}, true, KindReplicaSet},
		// Covered by their controller: a CronJob's Job, a Deployment's ReplicaSet.
		{&batchv1.Job{ObjectMeta: owned(meta, "CronJob"), Spec: batchv1.JobSpec{Template: tmpl}}, false, ""},
		{&appsv1.ReplicaSet{ObjectMeta: owned(meta, "Deployment"), Spec: appsv1.ReplicaSetSpec{Template: tmpl}}, false, ""},
		// A non-controller owner does not cover; a controller above a Deployment or CronJob does
		// not either (no kind retrycap reads stands above them).
		{&batchv1.Job{ObjectMeta: withOwner(meta, metav1.OwnerReference{Kind: "ConfigMap", Name: "c"}), Spec: batchv1.JobSpec{Template: tmpl}}, true, KindJob},
		{&batchv1.CronJob{ObjectMeta: owned(meta, "Backup"), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, true, KindCronJob},
		{&appsv1.Deployment{ObjectMeta: owned(meta, "Application"), Spec: appsv1.DeploymentSpec{Template: tmpl}}, true, KindDeployment},
		{&corev1.Service{ObjectMeta: meta}, false, ""},
	}
	for _, tt := range tests {
		w, ok := FromObject(tt.obj)
		if ok != tt.ok {
			t.Fatalf("%T: ok %v", tt.obj, ok)
		}
		if !ok {
			continue
		}
		want := Workload{Kind: tt.kind, Namespace: "shop", Name: "x", Labels: PairsOf(tmpl.Labels), Annotations: PairsOf(tmpl.Annotations)}
		if !reflect.DeepEqual(w, want) {
			t.Fatalf("%T: %+v", tt.obj, w)
		}
	}
}

func withOwner(m metav1.ObjectMeta, r metav1.OwnerReference) metav1.ObjectMeta {
	m.OwnerReferences = []metav1.OwnerReference{r}
	return m
}

func owned(m metav1.ObjectMeta, kind string) metav1.ObjectMeta {
	ctrl := true
	return withOwner(m, metav1.OwnerReference{Kind: kind, Name: "owner", Controller: &ctrl})
}

func TestServiceName(t *testing.T) {
	w := Workload{Name: "order-v2"}
	if w.ServiceName() != "order-v2" {
		t.Fatal(w.ServiceName())
	}
	w.Labels = PairsOf(map[string]string{annotations.NameLabel: "order"})
	if w.ServiceName() != "order" {
		t.Fatal(w.ServiceName())
	}
	w.Annotations = PairsOf(map[string]string{annotations.Service: "orders"})
	if w.ServiceName() != "orders" {
		t.Fatal(w.ServiceName())
	}
}

func TestSelects(t *testing.T) {
	w := deploy("shop", "a", "", map[string]string{"tier": "web"})
	p := policy("shop", "p", 4)
	for _, tt := range []struct {
		sel  *metav1.LabelSelector
		ns   string
		want bool
	}{
		{nil, "shop", true},
		{&metav1.LabelSelector{}, "shop", true},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}, "shop", true},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}, "shop", false},
		{&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}, "shop", true},
		{nil, "other", false},
	} {
		p.Spec.Selector, p.Namespace = tt.sel, tt.ns
		got, err := ForRetryPolicy(p).Selects(w)
		if err != nil || got != tt.want {
			t.Fatalf("selector %v ns %s: %v %v", tt.sel, tt.ns, got, err)
		}
	}
	p.Namespace = "shop"
	p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}}
	if _, err := ForRetryPolicy(p).Selects(w); err == nil {
		t.Fatal("bad selector accepted")
	}
}

func TestBuildScenarios(t *testing.T) {
	t.Run("incident18", func(t *testing.T) {
		p := policy("shop", "checkout", 3, v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2})
		ws := []Workload{deploy("shop", "db", "", nil), deploy("shop", "catalog", "db=3", nil), deploy("shop", "gateway", "catalog=3", nil)}
		r, a := Analyze(ForRetryPolicy(p), ws, nil)
		if len(r.Errors) != 0 || a.Amplification != 18 || strings.Join(a.WorstPath, ">") != "gateway>catalog>db" {
			t.Fatalf("errors %v amplification %d path %v", r.Errors, a.Amplification, a.WorstPath)
		}
		if a.Violations[0].Message != "client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3" {
			t.Fatal(a.Violations[0].Message)
		}
	})
	t.Run("storm27", func(t *testing.T) {
		p := policy("payments", "storm", 4)
		ws := []Workload{
			deploy("payments", "frontend", "checkout=3", nil), deploy("payments", "checkout", "billing=3", nil),
			deploy("payments", "billing", "payment=3", nil), deploy("payments", "payment", "", nil),
			deploy("shop", "gateway", "frontend.payments=3", nil), // other namespace: not selected
		}
		_, a := Analyze(ForRetryPolicy(p), ws, nil)
		if a.Amplification != 27 || a.Services != 4 || a.Edges != 3 || a.WorstCaseLoad != (graph.ServiceLoad{Service: "payment", Requests: 27}) {
			t.Fatalf("%+v", a)
		}
		if got := a.Entrypoints; !reflect.DeepEqual(got, []graph.Entrypoint{{Service: "frontend", ClientAttempts: 1}}) {
			t.Fatalf("entrypoints %+v", got)
		}
	})
}

func TestBuildNamesDefaultsAndMerges(t *testing.T) {
	p := policy("shop", "p", 4)
	p.Spec.Retry.DefaultAttempts = 2
	p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"part-of": "shop"}}
	shop := map[string]string{"part-of": "shop"}
	canary := deploy("shop", "order-canary", "payment.shop.svc.cluster.local=3*2, ledger.finance=2", map[string]string{"part-of": "shop", annotations.NameLabel: "order"})
	ws := []Workload{
		deploy("shop", "gateway", "order.shop, order.shop.svc=1, api.stripe.com", shop), // order.shop and order.shop.svc merge: larger attempts
		deploy("shop", "order", "payment=2*5, ledger.finance.svc", shop),
		canary,
		deploy("shop", "batch", "order=9", nil), // unselected: its edge does not count
		{Kind: KindStatefulSet, Namespace: "shop", Name: "payment", Labels: PairsOf(shop)},
	}
	r := Build(ForRetryPolicy(p), ws, nil)
	if len(r.Errors) != 0 {
		t.Fatal(r.Errors)
	}
	var got []string
	for _, e := range r.Graph.Edges() {
		got = append(got, e.From+">"+e.To+"="+graph.FormatInt(e.Attempts)+"*"+graph.FormatInt(e.Calls))
	}
	want := []string{"gateway>order=2*1", "gateway>api.stripe.com=2*1", "order>payment=3*5", "order>ledger.finance=2*1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("edges %q, want %q", got, want)
	}
	if r.ServiceOf[canary.Key()] != "order" || len(r.Selected) != 4 {
		t.Fatalf("selected %v services %v", r.Selected, r.ServiceOf)
	}
	a := graph.Analyze(r.Graph, r.Cap)
	if a.Amplification != 6 || a.Entrypoints[0].Service != "gateway" || len(a.Entrypoints) != 1 {
		t.Fatalf("amplification %d entrypoints %v", a.Amplification, a.Entrypoints)
	}
}

func TestBuildInvalidAnnotation(t *testing.T) {
	p := policy("shop", "checkout", 4, v1alpha1.Entrypoint{Service: "gateway"}, v1alpha1.Entrypoint{Service: "ghost"})
	ws := []Workload{
		deploy("shop", "gateway", "order=3", nil),
		deploy("shop", "order", "db=2, payment=x", nil),
		{Kind: KindPod, Namespace: "shop", Name: "debug", Annotations: PairsOf(map[string]string{annotations.Service: "Bad_Name"})},
	}
	r := Build(ForRetryPolicy(p), ws, nil)
	if len(r.Errors) != 2 {
		t.Fatalf("errors %v", r.Errors)
	}
	const want = `Deployment shop/order: annotation retrycap.dev/upstreams: token "payment=x" at column 7: attempts must be an integer 1..100`
	if r.Errors[1].Error() != want {
		t.Fatalf("error\n%s\nwant\n%s", r.Errors[1], want)
	}
	var ae *AnnotationError
	var pe *annotations.ParseError
	if !errors.As(r.Errors[1], &ae) || !errors.As(r.Errors[1], &pe) || pe.Column != 7 || ae.Workload.Name != "order" {
		t.Fatalf("%#v", r.Errors[1])
	}
	if r.Errors[0].Error() != `Pod shop/debug: annotation retrycap.dev/service: service name "Bad_Name" is not a DNS-1123 label: only lower-case letters, digits and '-' are allowed` {
		t.Fatal(r.Errors[0])
	}
	// The invalid workload's service stays, without edges; the others are analysed.
	if !r.Graph.IsSelected("order") || len(r.Graph.OutEdges("order")) != 0 || r.Graph.Has("db") {
		t.Fatal("invalid workload's edges used")
	}
	if !reflect.DeepEqual(r.Warnings, []string{`entrypoint "ghost" is not the service of any selected workload`}) {
		t.Fatal(r.Warnings)
	}
}

func TestBuildWithAndRaises(t *testing.T) {
	p := policy("shop", "checkout", 4)
	stored := []Workload{deploy("shop", "gateway", "order=3", nil), deploy("shop", "order", "payment=1", nil), deploy("shop", "payment", "", nil)}
	incoming := deploy("shop", "order", "payment=3", nil)
	r := BuildWith(ForRetryPolicy(p), stored, incoming, nil)
	if e, _ := r.Graph.Edge("order", "payment"); e.Attempts != 3 || len(r.Selected) != 3 {
		t.Fatalf("edge %+v selected %d", e, len(r.Selected))
	}
	j := graph.Judge(r.Graph, r.Cap, "order")
	plan, _ := graph.PlanLocal(r.Graph, r.Cap, "order")
	if got := graph.AdmissionMessage("shop/checkout", j, plan); got != "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1" {
		t.Fatal(got)
	}
	for _, tt := range []struct {
		old, new string
		want     bool
	}{
		{"payment=1", "payment=3", true},
		{"payment=3", "payment=1", false},
		{"payment=3", "payment.shop=3", false},
		{"payment=3", "payment=3, ledger", true},
		{"payment=3, ledger", "payment=2", false},
		{"payment", "payment=1", false},
		{"garbage=", "payment=1", true},
	} {
		got, err := RaisesRetries(ForRetryPolicy(p), deploy("shop", "order", tt.old, nil), deploy("shop", "order", tt.new, nil))
		if err != nil || got != tt.want {
			t.Fatalf("%q -> %q: %v %v", tt.old, tt.new, got, err)
		}
	}
	if _, err := RaisesRetries(ForRetryPolicy(p), incoming, deploy("shop", "order", "payment=0", nil)); err == nil {
		t.Fatal("invalid incoming accepted")
	}
}

func TestNormalizeUpstream(t *testing.T) {
	for in, want := range map[string]string{
		"order": "order", "order.shop": "order", "order.shop.svc": "order", "order.shop.svc.cluster.local": "order",
		"order.other": "order.other", "order.other.svc.cluster.local": "order.other", "api.stripe.com": "api.stripe.com",
		"a.b.c.d": "a.b.c.d",
	} {
		if got := NormalizeUpstream(in, "shop"); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// The gate judges the incoming workload's own edges: a sibling sharing its service name (a
// canary) keeps its node but not its edges, so the sibling's larger attempts are not held
// against the incoming one; unrelated workloads keep theirs.
func TestBuildJudgedDropsSiblingEdges(t *testing.T) {
	p := policy("shop", "checkout", 4)
	canary := deploy("shop", "order-v2", "payment=3, audit=2", nil)
	canary.Annotations = canary.Annotations.With(annotations.Service, "order")
	stored := []Workload{deploy("shop", "gateway", "order=3", nil), canary, deploy("shop", "payment", "db=2", nil)}
	incoming := deploy("shop", "order", "payment=1", nil)
	for _, tt := range []struct {
		name      string
		r         *Result
		from, to  string
		attempts  int64
		hasEdge   bool
		selected  int
		edgeCount int
	}{
		{"BuildWith merges the canary's edge", BuildWith(ForRetryPolicy(p), stored, incoming, nil), "order", "payment", 3, true, 4, 4},
		{"BuildJudged: incoming's own value", BuildJudged(ForRetryPolicy(p), parseAll(stored), Parse(incoming), nil, nil), "order", "payment", 1, true, 4, 3},
		{"BuildJudged: the canary's other upstream is gone", BuildJudged(ForRetryPolicy(p), parseAll(stored), Parse(incoming), nil, nil), "order", "audit", 0, false, 4, 3},
		{"BuildJudged: others keep their edges", BuildJudged(ForRetryPolicy(p), parseAll(stored), Parse(incoming), nil, nil), "payment", "db", 2, true, 4, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := tt.r.Graph.Edge(tt.from, tt.to)
			if ok != tt.hasEdge || (ok && e.Attempts != tt.attempts) || len(tt.r.Selected) != tt.selected || tt.r.Graph.NumEdges() != tt.edgeCount {
				t.Fatalf("edge %+v %v, selected %d, edges %d", e, ok, len(tt.r.Selected), tt.r.Graph.NumEdges())
			}
		})
	}
	if canary.Annotations.Get(annotations.Upstreams) != "payment=3, audit=2" {
		t.Fatal("BuildJudged changed the cached workload's annotations")
	}
}

// TestBuildParsedMatchesBuild checks the entry points over pre-parsed workloads against Build and
// BuildJudged over the same workloads, in any order: one builder, whatever the way in.
func TestBuildParsedMatchesBuild(t *testing.T) {
	bad := deploy("shop", "Bad_Name", "order=2", nil)
	malformed := deploy("shop", "broken", "order=", nil)
	canary := deploy("shop", "order-canary", "payment=3", nil)
	canary.Annotations = canary.Annotations.With(annotations.Service, "order")
	ws := []Workload{
		deploy("shop", "order", "payment=2, audit.other, api.stripe.com=3", nil),
		deploy("shop", "gateway", "order.shop.svc.cluster.local", nil),
		canary, bad, malformed,
		deploy("other", "gateway", "order=9", nil),
		deploy("shop", "payment", "", map[string]string{"tier": "db"}),
	}
	p := policy("shop", "checkout", 4, v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2}, v1alpha1.Entrypoint{Service: "nobody"})
	p.Spec.Retry.DefaultAttempts = 3
	same := func(what string, got, want *Result) {
		t.Helper()
		errs := func(r *Result) []string {
			var s []string
			for _, e := range r.Errors {
				s = append(s, e.Error())
			}
			return s
		}
		if !reflect.DeepEqual(got.Selected, want.Selected) || !reflect.DeepEqual(got.ServiceOf, want.ServiceOf) ||
			!reflect.DeepEqual(errs(got), errs(want)) || !reflect.DeepEqual(got.Warnings, want.Warnings) ||
			!reflect.DeepEqual(got.Graph.Services(), want.Graph.Services()) || !reflect.DeepEqual(got.Graph.Edges(), want.Graph.Edges()) ||
			!reflect.DeepEqual(got.Graph.Entrypoints(), want.Graph.Entrypoints()) {
			t.Fatalf("%s: got %+v %v %v, want %+v %v %v", what, got, got.Graph.Edges(), errs(got), want, want.Graph.Edges(), errs(want))
		}
	}
	parse := func(ws []Workload) []*Parsed {
		ps := make([]*Parsed, len(ws))
		for i, w := range ws {
			ps[i] = Parse(w)
		}
		return ps
	}
	want := Build(ForRetryPolicy(p), ws, nil)
	if len(want.Errors) != 2 || want.Graph.NumEdges() != 4 {
		t.Fatalf("the fixture says little: errors %v, edges %v", want.Errors, want.Graph.Edges())
	}
	same("unsorted", BuildParsed(ForRetryPolicy(p), parse(ws), nil, nil), want)
	sorted := parse(ws)
	slices.SortFunc(sorted, compareParsed)
	same("sorted", BuildParsed(ForRetryPolicy(p), sorted, nil, nil), want)

	incoming := deploy("shop", "order", "payment=4", nil)
	before := slices.Clone(sorted)
	same("judged", BuildJudged(ForRetryPolicy(p), sorted, Parse(incoming), nil, nil), BuildJudged(ForRetryPolicy(p), parseAll(ws), Parse(incoming), nil, nil))
	if !slices.Equal(sorted, before) || sorted[slices.IndexFunc(sorted, func(x *Parsed) bool { return x.Key() == canary.Key() })].upstreams == nil {
		t.Fatalf("BuildJudgedParsed changed the shared workloads")
	}
	j := BuildJudged(ForRetryPolicy(p), sorted, Parse(incoming), nil, nil)
	if e, _ := j.Graph.Edge("order", "payment"); e.Attempts != 4 {
		t.Fatalf("judged order->payment = %+v, want the incoming 4 (the canary's 3 dropped)", e)
	}
}
