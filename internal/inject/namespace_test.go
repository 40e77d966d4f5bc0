package inject

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// decideIn is Decide for a pod of namespace shop (labels nsLabels plus the injection label,
// annotations nsAnn) with pod labels and annotations, under a policy that selects it.
func decideIn(nsLabels, nsAnn, podLabels, podAnn map[string]string) Decision {
	labels := map[string]string{"retrycap.dev/injection": "enabled"}
	for k, v := range nsLabels {
		labels[k] = v
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Labels: podLabels, Annotations: podAnn},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
	return Decide(testConfig, Input{Pod: pod, NamespaceLabels: labels, NamespaceAnnotations: nsAnn,
		Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
}

func proxyOf(t *testing.T, d Decision) corev1.Container {
	t.Helper()
	if !d.Injected {
		t.Fatalf("skipped: %v; want injected", d.Skip)
	}
	return d.Pod.Spec.InitContainers[len(d.Pod.Spec.InitContainers)-1]
}

// The proxy resource annotations on the pod's Namespace: each the pod does not set applies (as
// Linkerd's config.linkerd.io/proxy-* on a Namespace), the pod's own wins, and a bad value of
// the Namespace's is refused naming the Namespace, the annotation and the value. On main the
// Namespace's annotations were not read: the defaults (10m/2/32Mi/64Mi) were rendered.
func TestNamespaceProxyResources(t *testing.T) {
	const (
		cpuReq = "retrycap.dev/proxy-cpu-request"
		cpuLim = "retrycap.dev/proxy-cpu-limit"
		memReq = "retrycap.dev/proxy-memory-request"
		memLim = "retrycap.dev/proxy-memory-limit"
	)
	type want struct {
		cpuReq, cpuLim, memReq, memLim, threads, warnings string
	}
	for _, tc := range []struct {
		name       string
		nsAnn, pod map[string]string
		want       want
		skip       string
	}{
		{name: "none", want: want{"10m", "2", "32Mi", "64Mi", "2", ""}},
		{name: "namespace's apply", nsAnn: map[string]string{cpuReq: "100m", cpuLim: "1", memReq: "48Mi", memLim: "96Mi"},
			want: want{"100m", "1", "48Mi", "96Mi", "1", ""}},
		{name: "the pod's win, the rest from the namespace", nsAnn: map[string]string{cpuReq: "100m", cpuLim: "1", memLim: "96Mi"},
			pod:  map[string]string{cpuLim: "1500m", memLim: "128Mi"},
			want: want{"100m", "1500m", "32Mi", "128Mi", "2", ""}},
		{name: "a bad namespace value the pod replaces is not read", nsAnn: map[string]string{memLim: "lots"}, pod: map[string]string{memLim: "80Mi"},
			want: want{"10m", "2", "32Mi", "80Mi", "2", ""}},
		{name: "low namespace memory limit: a warning naming the Namespace", nsAnn: map[string]string{memLim: "24Mi", memReq: "24Mi"},
			want: want{"10m", "2", "24Mi", "24Mi", "2", `annotation retrycap.dev/proxy-memory-limit "24Mi" of Namespace shop is below 32Mi: the proxy holds up to about 23 MiB under load, so it may be killed for memory (OOMKilled) under load`}},
		{name: "bad namespace value", nsAnn: map[string]string{cpuLim: "two"},
			skip: `InvalidAnnotation: Pod shop/p: annotation retrycap.dev/proxy-cpu-limit "two" of Namespace shop is not a Kubernetes quantity (such as 500m, 1 or 48Mi): quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{name: "namespace memory limit below the floor", nsAnn: map[string]string{memLim: "16Mi"},
			skip: `InvalidAnnotation: Pod shop/p: annotation retrycap.dev/proxy-memory-limit "16Mi" of Namespace shop is below 20Mi, the least the proxy runs in: it holds about 18 MiB idle, so it would be killed for memory (OOMKilled) before it served`},
		{name: "the pod's request above the namespace's limit", nsAnn: map[string]string{cpuLim: "1"}, pod: map[string]string{cpuReq: "2"},
			skip: `InvalidAnnotation: Pod shop/p: annotation retrycap.dev/proxy-cpu-request "2" is above annotation retrycap.dev/proxy-cpu-limit "1" of Namespace shop: the proxy's CPU request may not exceed its CPU limit`},
		// A Namespace's request is a default: under a limit the pod sets it is lowered to it, as
		// the built-in default request is (and as Kubernetes fills a missing request).
		{name: "the namespace's request above the pod's limit", nsAnn: map[string]string{memReq: "64Mi"}, pod: map[string]string{memLim: "48Mi"},
			want: want{"10m", "2", "48Mi", "48Mi", "2", ""}},
		{name: "the namespace's request above its own limit", nsAnn: map[string]string{memReq: "64Mi", memLim: "48Mi"},
			skip: `InvalidAnnotation: Pod shop/p: annotation retrycap.dev/proxy-memory-request "64Mi" of Namespace shop is above annotation retrycap.dev/proxy-memory-limit "48Mi" of Namespace shop: the proxy's memory request may not exceed its memory limit`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideIn(nil, tc.nsAnn, nil, tc.pod)
			if tc.skip != "" {
				if d.Injected || d.Skip.String() != tc.skip {
					t.Fatalf("injected %t, skip %q\nwant skip %q", d.Injected, d.Skip, tc.skip)
				}
				if got := d.Pod.Annotations[SkippedAnnotation]; got != tc.skip {
					t.Fatalf("annotation %s = %q", SkippedAnnotation, got)
				}
				return
			}
			c := proxyOf(t, d)
			r := c.Resources
			got := want{r.Requests.Cpu().String(), r.Limits.Cpu().String(), r.Requests.Memory().String(), r.Limits.Memory().String(), c.Env[0].Value, d.Pod.Annotations[WarningsAnnotation]}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// OpenShift's restricted-v2 SCC refuses a container whose runAsUser is outside the Namespace's
// UID range: the proxy takes its uid (and gid) from the range as Istio's injector does
// (GetProxyIDs: the range's last uid; the first supplemental group block's last gid, else the
// UID range's). On main the proxy always ran as 65532:65532.
func TestProxyIDs(t *testing.T) {
	const (
		uidRange = "openshift.io/sa.scc.uid-range"
		groups   = "openshift.io/sa.scc.supplemental-groups"
	)
	for _, tc := range []struct {
		name     string
		nsAnn    map[string]string
		uid, gid int64
		skip     string
	}{
		{name: "not OpenShift", uid: 65532, gid: 65532},
		{name: "uid range as OpenShift writes it", nsAnn: map[string]string{uidRange: "1000680000/10000"}, uid: 1000689999, gid: 1000689999},
		{name: "and its supplemental groups", nsAnn: map[string]string{uidRange: "1000680000/10000", groups: "1000690000/10000,5000/10"}, uid: 1000689999, gid: 1000699999},
		{name: "dash form", nsAnn: map[string]string{uidRange: "2000-2999"}, uid: 2999, gid: 2999},
		{name: "groups alone", nsAnn: map[string]string{groups: "3000/1"}, uid: 65532, gid: 3000},
		{name: "the largest range", nsAnn: map[string]string{uidRange: "4294967294/2"}, uid: 4294967295, gid: 4294967295},
		{name: "not a range", nsAnn: map[string]string{uidRange: "1000680000"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "1000680000" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): no "/" or "-"`},
		{name: "empty", nsAnn: map[string]string{uidRange: ""},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): no "/" or "-"`},
		{name: "trailing bytes", nsAnn: map[string]string{uidRange: "1000680000/10000x"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "1000680000/10000x" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the size "10000x" is not a number from 0 to 4294967295`},
		{name: "size 0", nsAnn: map[string]string{uidRange: "1000680000/0"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "1000680000/0" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the size is 0`},
		{name: "past uint32", nsAnn: map[string]string{uidRange: "4294967295/2"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "4294967295/2" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the range ends at 4294967296, above 4294967295`},
		{name: "end below start", nsAnn: map[string]string{uidRange: "3000-2000"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "3000-2000" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the end 2000 is below the start 3000`},
		{name: "root", nsAnn: map[string]string{uidRange: "0/1"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "0/1" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the range ends at 0, root, which the proxy's runAsNonRoot refuses`},
		{name: "negative", nsAnn: map[string]string{uidRange: "-5/10"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.uid-range "-5/10" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the start "-5" is not a number from 0 to 4294967295`},
		{name: "bad groups", nsAnn: map[string]string{uidRange: "1000680000/10000", groups: "lots"},
			skip: `InvalidAnnotation: Namespace shop: annotation openshift.io/sa.scc.supplemental-groups "lots" is not a list of group ranges ("<start>/<size>" or "<start>-<end>", comma-separated): no "/" or "-"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideIn(nil, tc.nsAnn, nil, nil)
			if tc.skip != "" {
				if d.Injected || d.Skip.String() != tc.skip {
					t.Fatalf("injected %t, skip %q\nwant skip %q", d.Injected, d.Skip, tc.skip)
				}
				return
			}
			sc := proxyOf(t, d).SecurityContext
			if *sc.RunAsUser != tc.uid || *sc.RunAsGroup != tc.gid || !*sc.RunAsNonRoot {
				t.Fatalf("runAsUser %d, runAsGroup %d, runAsNonRoot %t; want %d, %d, true", *sc.RunAsUser, *sc.RunAsGroup, *sc.RunAsNonRoot, tc.uid, tc.gid)
			}
			if d.Pod.Spec.SecurityContext != nil {
				t.Fatalf("pod securityContext %+v: Istio sets no fsGroup, neither does retrycap", d.Pod.Spec.SecurityContext)
			}
		})
	}
}

// Istio's injector will add istio-proxy (15001, 15020) after retrycap when its webhook
// configuration's name sorts after retrycap's: the pod would never start. The rules are Istio's
// webhooks' selectors and injectRequired (istioWillInject). On main each of these pods was
// injected.
func TestIstioWillInject(t *testing.T) {
	const tail = ": Istio's injector will add its sidecar istio-proxy, whose Envoy listens on 15001 and whose agent on 15020: the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	for _, tc := range []struct {
		name               string
		ns, labels, podAnn map[string]string
		want               string // the skip, "" for injected
	}{
		{name: "namespace istio-injection=enabled", ns: map[string]string{"istio-injection": "enabled"},
			want: "PortConflict: namespace shop is labelled istio-injection=enabled" + tail},
		{name: "enabled, pod label false", ns: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"sidecar.istio.io/inject": "false"}},
		{name: "enabled, pod annotation false", ns: map[string]string{"istio-injection": "enabled"}, podAnn: map[string]string{"sidecar.istio.io/inject": "false"}},
		{name: "enabled, label true beats annotation false", ns: map[string]string{"istio-injection": "enabled"},
			labels: map[string]string{"sidecar.istio.io/inject": "true"}, podAnn: map[string]string{"sidecar.istio.io/inject": "false"},
			want: "PortConflict: namespace shop is labelled istio-injection=enabled" + tail},
		{name: "namespace istio-injection=disabled, pod label true", ns: map[string]string{"istio-injection": "disabled"}, labels: map[string]string{"sidecar.istio.io/inject": "true"}},
		{name: "namespace istio-injection=disabled wins over istio.io/rev", ns: map[string]string{"istio-injection": "disabled", "istio.io/rev": "canary"}},
		{name: "namespace istio.io/rev", ns: map[string]string{"istio.io/rev": "canary"},
			want: "PortConflict: namespace shop is labelled istio.io/rev=canary" + tail},
		{name: "namespace istio.io/rev, pod label false", ns: map[string]string{"istio.io/rev": "canary"}, labels: map[string]string{"sidecar.istio.io/inject": "false"}},
		{name: "pod label true", labels: map[string]string{"sidecar.istio.io/inject": "true"},
			want: `PortConflict: label sidecar.istio.io/inject is "true"` + tail},
		{name: "pod annotation true alone selects no webhook", podAnn: map[string]string{"sidecar.istio.io/inject": "true"}},
		{name: "pod label istio.io/rev", labels: map[string]string{"istio.io/rev": "stable"},
			want: `PortConflict: label istio.io/rev is "stable"` + tail},
		{name: "pod label istio.io/rev, annotation false", labels: map[string]string{"istio.io/rev": "stable"}, podAnn: map[string]string{"sidecar.istio.io/inject": "false"}},
		{name: "pod label istio.io/rev, label false", labels: map[string]string{"istio.io/rev": "stable", "sidecar.istio.io/inject": "false"}},
		{name: "enabled, pod label neither true nor false: Istio's default, inject", ns: map[string]string{"istio-injection": "enabled"},
			labels: map[string]string{"sidecar.istio.io/inject": "yes"}, podAnn: map[string]string{"sidecar.istio.io/inject": "false"},
			want: "PortConflict: namespace shop is labelled istio-injection=enabled" + tail},
		{name: "no Istio labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideIn(tc.ns, nil, tc.labels, tc.podAnn)
			got := ""
			if !d.Injected {
				got = d.Skip.String()
			}
			if got != tc.want {
				t.Fatalf("skip %q\nwant %q", got, tc.want)
			}
			if tc.want != "" && !reflect.DeepEqual(d.Pod.Spec.InitContainers, []corev1.Container(nil)) {
				t.Fatalf("init containers %v on a skipped pod", d.Pod.Spec.InitContainers)
			}
		})
	}
	// Istio never injects its ignored namespaces (kube-public here; kube-system is retrycap's
	// excluded namespace anyway).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "p"}}
	if why := istioWillInject(nil, pod, map[string]string{"istio-injection": "enabled"}); why != "" {
		t.Fatalf("kube-public: %q", why)
	}
}

// A Namespace's refused value is a *ResourceError naming the Namespace, for a caller that reports
// it its own way; the pod's own has none.
func TestNamespaceResourceError(t *testing.T) {
	_, _, _, err := proxyResources("Pod shop/p", "shop", map[string]string{"retrycap.dev/proxy-cpu-limit": "0"}, nil)
	var e *ResourceError
	if !errors.As(err, &e) || e.Namespace != "shop" || e.Annotation != "retrycap.dev/proxy-cpu-limit" || e.Value != "0" ||
		err.Error() != `Pod shop/p: annotation retrycap.dev/proxy-cpu-limit "0" of Namespace shop: the proxy's CPU limit must be above 0 (without the annotation it is 2)` {
		t.Fatalf("error %v (%+v)", err, e)
	}
	_, _, _, err = proxyResources("Pod shop/p", "shop", map[string]string{"retrycap.dev/proxy-cpu-limit": "1"}, map[string]string{"retrycap.dev/proxy-cpu-limit": "0"})
	if !errors.As(err, &e) || e.Namespace != "" || e.Value != "0" {
		t.Fatalf("the pod's own value: error %v (%+v), want no Namespace", err, e)
	}
}
