package workload

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

func awsDeployment(upstreams string, containers ...corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "uploader"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{annotations.Upstreams: upstreams}},
			Spec:       corev1.PodSpec{Containers: containers},
		}},
	}
}

func envContainer(name string, kv ...string) corev1.Container {
	c := corev1.Container{Name: name}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Env = append(c.Env, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return c
}

func TestAWSSDKTries(t *testing.T) {
	cases := []struct {
		name       string
		upstreams  string
		containers []corev1.Container
		want       []int32 // attempts per upstream after Parse
		wantErr    string
		wantNote   string
	}{
		{name: "max attempts", upstreams: "s3.eu-west-1.amazonaws.com, orders",
			containers: []corev1.Container{envContainer("app", "AWS_MAX_ATTEMPTS", "7", "AWS_RETRY_MODE", "standard")},
			want:       []int32{7, 0},
			wantNote:   `Deployment shop/uploader: upstream "s3.eu-west-1.amazonaws.com" is an AWS endpoint called through the AWS SDK: 7 tries (container app AWS_MAX_ATTEMPTS=7)`},
		{name: "standard", upstreams: "dynamodb.us-east-1.amazonaws.com",
			containers: []corev1.Container{envContainer("app", "AWS_RETRY_MODE", "standard")}, want: []int32{3}},
		{name: "adaptive", upstreams: "sqs.us-east-1.amazonaws.com",
			containers: []corev1.Container{envContainer("app", "AWS_RETRY_MODE", "Adaptive")}, want: []int32{3}},
		{name: "legacy", upstreams: "sqs.us-east-1.amazonaws.com",
			containers: []corev1.Container{envContainer("app", "AWS_RETRY_MODE", "legacy")}, want: []int32{5}},
		{name: "nothing set: legacy default", upstreams: "s3.amazonaws.com.cn",
			containers: []corev1.Container{envContainer("app")}, want: []int32{5},
			wantNote: `Deployment shop/uploader: upstream "s3.amazonaws.com.cn" is an AWS endpoint called through the AWS SDK: 5 tries (no AWS_MAX_ATTEMPTS or AWS_RETRY_MODE set: the SDK's default legacy mode, 5 attempts assumed (SDK-specific; the worst general default))`},
		{name: "explicit =N wins", upstreams: "s3.amazonaws.com=2",
			containers: []corev1.Container{envContainer("app", "AWS_MAX_ATTEMPTS", "9")}, want: []int32{2}},
		{name: "not an AWS host", upstreams: "amazonaws.com.evil.example, notamazonaws.com",
			containers: []corev1.Container{envContainer("app", "AWS_MAX_ATTEMPTS", "9")}, want: []int32{0, 0}},
		{name: "worst container", upstreams: "s3.amazonaws.com",
			containers: []corev1.Container{envContainer("a", "AWS_MAX_ATTEMPTS", "2"), envContainer("b", "AWS_MAX_ATTEMPTS", "4"), envContainer("c")},
			want:       []int32{4}},
		{name: "bad max attempts", upstreams: "s3.amazonaws.com",
			containers: []corev1.Container{envContainer("app", "AWS_MAX_ATTEMPTS", "0")}, want: []int32{0},
			wantErr: `Deployment shop/uploader: container app: env AWS_MAX_ATTEMPTS="0": want a whole number > 0`},
		{name: "bad mode", upstreams: "s3.amazonaws.com",
			containers: []corev1.Container{envContainer("app", "AWS_RETRY_MODE", "fast")}, want: []int32{0},
			wantErr: `Deployment shop/uploader: container app: env AWS_RETRY_MODE="fast": want standard, adaptive or legacy`},
		{name: "bad env without an AWS upstream is not read", upstreams: "orders",
			containers: []corev1.Container{envContainer("app", "AWS_RETRY_MODE", "fast")}, want: []int32{0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ok := FromObject(awsDeployment(c.upstreams, c.containers...))
			if !ok {
				t.Fatal("not a workload")
			}
			x := Parse(w)
			if x.upstreamsErr != nil {
				t.Fatal(x.upstreamsErr)
			}
			var got []int32
			for _, u := range x.upstreams {
				got = append(got, u.Attempts)
			}
			if len(got) != len(c.want) {
				t.Fatalf("attempts %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("attempts %v, want %v", got, c.want)
				}
			}
			gotErr := ""
			if x.envErr != nil {
				gotErr = x.envErr.Error()
			}
			if gotErr != c.wantErr {
				t.Fatalf("error %q, want %q", gotErr, c.wantErr)
			}
			if c.wantNote != "" && (len(x.awsNotes) == 0 || x.awsNotes[0] != c.wantNote) {
				t.Fatalf("notes %q, want first %q", x.awsNotes, c.wantNote)
			}
		})
	}
}

func TestAWSValueFromNoted(t *testing.T) {
	c := envContainer("app", "AWS_RETRY_MODE", "standard")
	c.Env = append(c.Env, corev1.EnvVar{Name: "AWS_MAX_ATTEMPTS", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "n"}}})
	w, _ := FromObject(awsDeployment("s3.amazonaws.com", c))
	x := Parse(w)
	want := `Deployment shop/uploader: upstream "s3.amazonaws.com" is an AWS endpoint called through the AWS SDK: 3 tries (container app AWS_RETRY_MODE=standard: 3 attempts); AWS_MAX_ATTEMPTS set through valueFrom, not read`
	if len(x.awsNotes) != 1 || x.awsNotes[0] != want {
		t.Fatalf("notes %q, want %q", x.awsNotes, want)
	}
	if x.upstreams[0].Attempts != 3 {
		t.Fatalf("attempts %d, want 3", x.upstreams[0].Attempts)
	}
}

// TestAWSEnvFix: a violation through an edge whose tries are the AWS SDK's is fixed with the
// container's AWS_MAX_ATTEMPTS, the only thing that changes the SDK, whatever set its tries.
func TestAWSEnvFix(t *testing.T) {
	valueFrom := envContainer("app", "AWS_RETRY_MODE", "legacy")
	valueFrom.Env = append(valueFrom.Env, corev1.EnvVar{Name: "AWS_MAX_ATTEMPTS", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "n"}}})
	cases := []struct {
		name       string
		upstreams  string
		containers []corev1.Container
		cap        int32
		want       []string // the suggestions, violation by violation
	}{
		{name: "max attempts set", upstreams: "s3.eu-west-1.amazonaws.com", cap: 4,
			containers: []corev1.Container{envContainer("app", "AWS_MAX_ATTEMPTS", "10")},
			want:       []string{"Deployment shop/uploader container app env AWS_MAX_ATTEMPTS: 10 -> 4"}},
		{name: "mode only", upstreams: "dynamodb.eu-west-1.amazonaws.com", cap: 2,
			containers: []corev1.Container{envContainer("app", "AWS_RETRY_MODE", "standard")},
			want:       []string{"Deployment shop/uploader container app env AWS_MAX_ATTEMPTS: unset (3) -> 2"}},
		{name: "nothing set: the first container that is no proxy", upstreams: "s3.amazonaws.com", cap: 1,
			containers: []corev1.Container{{Name: "linkerd-proxy"}, {Name: "main"}, {Name: "sidecar"}},
			want:       []string{"Deployment shop/uploader container main env AWS_MAX_ATTEMPTS: unset (5) -> 1"}},
		{name: "max attempts through valueFrom", upstreams: "s3.amazonaws.com", cap: 3,
			containers: []corev1.Container{valueFrom},
			want:       []string{"Deployment shop/uploader container app env AWS_MAX_ATTEMPTS: valueFrom, not read (5 assumed) -> 3"}},
		{name: "an explicit =N is the annotation's", upstreams: "s3.amazonaws.com=6", cap: 2,
			containers: []corev1.Container{envContainer("app", "AWS_MAX_ATTEMPTS", "10")},
			want:       []string{"uploader: s3.amazonaws.com=2"}},
		{name: "two AWS calls, one fix each", upstreams: "s3.amazonaws.com, sqs.us-east-1.amazonaws.com", cap: 3,
			containers: []corev1.Container{envContainer("app", "AWS_MAX_ATTEMPTS", "4")},
			want: []string{"Deployment shop/uploader container app env AWS_MAX_ATTEMPTS: 4 -> 3",
				"Deployment shop/uploader container app env AWS_MAX_ATTEMPTS: 4 -> 3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ok := FromObject(awsDeployment(c.upstreams, c.containers...))
			if !ok {
				t.Fatal("not a workload")
			}
			_, a := Analyze(ForRetryPolicy(policy("shop", "p", c.cap, v1alpha1.Entrypoint{Service: "uploader"})), []Workload{w}, nil)
			var got []string
			for _, v := range a.Violations {
				got = append(got, v.Suggestion)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("suggestions\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

// TestAWSEnvFixSiblings: two workloads of service uploader call S3, one through the SDK's env,
// one with an explicit "=10": each gets the fix in its own unit, neither is dropped.
func TestAWSEnvFixSiblings(t *testing.T) {
	sdk, _ := FromObject(awsDeployment("s3.amazonaws.com", envContainer("app", "AWS_MAX_ATTEMPTS", "10")))
	d := awsDeployment("s3.amazonaws.com=10", envContainer("app"))
	d.Name = "uploader-v2"
	d.Spec.Template.Annotations[annotations.Service] = "uploader"
	explicit, _ := FromObject(d)
	_, a := Analyze(ForRetryPolicy(policy("shop", "p", 4, v1alpha1.Entrypoint{Service: "uploader"})), []Workload{sdk, explicit}, nil)
	if len(a.Violations) != 1 {
		t.Fatalf("%d violations, want 1: %+v", len(a.Violations), a.Violations)
	}
	const want = "Deployment shop/uploader container app env AWS_MAX_ATTEMPTS: 10 -> 4; uploader: s3.amazonaws.com=4"
	if got := a.Violations[0].Suggestion; got != want {
		t.Fatalf("suggestion %q, want %q", got, want)
	}
}
