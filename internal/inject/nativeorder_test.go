package inject

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// inject18: a Job's pod with its own native sidecar (kubernetes/website's job-sidecar example,
// testdata/job-native-sidecar.yaml). The proxy is a native sidecar after the pod's own, so the
// kubelet stops it once the app has exited and the pod (and the Job) completes; the pod's
// sidecar, started before the proxy, is not pointed at it (docs/decisions.md, inject18).
func TestInject18JobNativeSidecar(t *testing.T) {
	in, err := readInput("testdata/job-native-sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := Decide(testConfig, in)
	if !d.Injected {
		t.Fatalf("skipped: %v", d.Skip)
	}
	var names []string
	for _, c := range d.Pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("init container %s: restartPolicy %v, want Always (a native sidecar, stopped when the app exits)", c.Name, c.RestartPolicy)
		}
		names = append(names, c.Name)
	}
	if want := []string{"logshipper", ContainerName}; !slices.Equal(names, want) {
		t.Fatalf("init containers %v, want %v", names, want)
	}
	if env := d.Pod.Spec.InitContainers[0].Env; len(env) != 0 {
		t.Errorf("logshipper env %v, want none (it starts before the proxy)", env)
	}
	if i := lastEnv(d.Pod.Spec.Containers[0].Env, "HTTP_PROXY"); i < 0 || d.Pod.Spec.Containers[0].Env[i].Value != "http://127.0.0.1:15001" {
		t.Errorf("myjob env %v: want HTTP_PROXY http://127.0.0.1:15001", d.Pod.Spec.Containers[0].Env)
	}
	if !slices.Contains(d.Pod.Spec.InitContainers[1].Args, "--service=myjob") {
		t.Errorf("proxy args %v: want --service=myjob", d.Pod.Spec.InitContainers[1].Args)
	}
	if d.Pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod restartPolicy %s, want Never (unchanged)", d.Pod.Spec.RestartPolicy)
	}
}
