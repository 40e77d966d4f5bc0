package inject

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// inj2_18: an egress proxy given through envFrom as ALL_PROXY (a ConfigMap of ALL_-prefixed
// keys, say). The injector's HTTP_PROXY and HTTPS_PROXY take the container's calls from it in
// curl and Python (TestInject18AllProxyClients); on main only sources that could hold a variable
// the injector writes were warned of, so a source prefixed ALL_ or all_ was not. Now it is, and
// the warning says what the container ends up with.
func TestInj218EnvFromAllProxy(t *testing.T) {
	const said = "container app takes variables from %s (envFrom), which retrycap cannot read: env takes precedence over envFrom, so an HTTP_PROXY, HTTPS_PROXY or NO_PROXY there is replaced by retrycap's, and an ALL_PROXY there loses to retrycap's HTTP_PROXY and HTTPS_PROXY; an egress proxy set in the container's env instead is kept, and the container left as it is"
	cases := []struct {
		name string
		from corev1.EnvFromSource
		warn string
	}{
		{name: "prefix ALL_", from: corev1.EnvFromSource{Prefix: "ALL_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "egress"}}},
			warn: "ConfigMap egress"},
		{name: "prefix all_", from: corev1.EnvFromSource{Prefix: "all_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "egress"}}},
			warn: "Secret egress"},
		{name: "no prefix", from: corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
			warn: "ConfigMap settings"},
		{name: "prefix APP_", from: corev1.EnvFromSource{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1", EnvFrom: []corev1.EnvFromSource{tc.from}}}}}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"},
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			if !d.Injected {
				t.Fatalf("skipped: %v", d.Skip)
			}
			var want []string
			if tc.warn != "" {
				want = []string{fmt.Sprintf(said, tc.warn)}
			}
			if !slices.Equal(d.Warnings, want) {
				t.Fatalf("warnings %q\nwant %q", d.Warnings, want)
			}
			// The container's env has retrycap's variables either way: they win over envFrom's.
			env := d.Pod.Spec.Containers[0].Env
			if i := lastEnv(env, "HTTP_PROXY"); i < 0 || env[i].Value != ProxyURL {
				t.Fatalf("HTTP_PROXY not retrycap's: %v", env)
			}
		})
	}
}
