package webhook

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// A pod of 1,000 containers that each set HTTP_PROXY gets 1,000 injector warnings: the API server
// keeps about 4 KiB of a response's warnings and dropped the other ~950 in silence (about 47 shown, none saying more were lost) (k8s.io/apiserver
// pkg/endpoints/filters/warning.go, truncateAtTotalRunes 4096). They now fit the gate's budget
// (3,500 characters) and the last line says how many were left out and where the first are kept.
func TestRedteamInjectorWarningsOfAThousandContainers(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: "shop", Annotations: map[string]string{"retrycap.dev/inject": "true"}}}
	for i := range 1000 {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "x",
			Env: []corev1.EnvVar{{Name: "HTTP_PROXY", Value: "http://corp:3128"}}})
	}
	policy := v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, Retry: v1alpha1.RetrySettings{DefaultAttempts: 3}}}
	d := inject.Decide(inject.Config{ProxyImage: "proxy:v1"}, inject.Input{Pod: pod, Policies: []v1alpha1.RetryPolicy{policy}})
	if !d.Injected || len(d.Warnings) != 1000 {
		t.Fatalf("injected %v (skip %v), %d warning(s); want injected, 1000", d.Injected, d.Skip, len(d.Warnings))
	}
	got := injectorWarnings(d.Warnings)
	total := 0
	for _, w := range got {
		total += utf8.RuneCountInString(w)
	}
	const shown = 38 // each "container cN sets HTTP_PROXY itself, ..." is 86-87 characters: 10x86 + 28x87 of 3,300 (200 kept for the last line)
	want := fmt.Sprintf("%d more warning(s) not shown (the API server keeps about 4 KiB of them): the pod's annotation retrycap.dev/injection-warnings holds the first 4 KiB, each container's env shows its own", 1000-shown)
	if len(got) != shown+1 || got[shown] != want || total > 3500 || got[0] != d.Warnings[0] {
		t.Fatalf("%d warning(s), %d characters, last %q; want %d, at most 3500, last %q", len(got), total, got[len(got)-1], shown+1, want)
	}
	if !strings.HasPrefix(got[0], "container c0 sets HTTP_PROXY itself") {
		t.Fatalf("first warning %q", got[0])
	}
}
