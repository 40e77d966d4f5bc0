package ha

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/controlplane"
	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
)

// Short leases, so the test takes seconds: a killed leader is replaced within lease + retry.
// The renew deadline is most of the lease: on a machine loaded by other suites the API server
// has been seen to take over 3 s to answer a renewal, and a leader that lost its lease that way
// (it restarts in place, correctly) would make the takeover being measured take a lease longer.
const (
	lease = 6 * time.Second
	renew = 5 * time.Second
	retry = 1 * time.Second
	ns    = "ha"
)

// manager is one cmd/manager process; its output is kept for the leader check and for failures.
type manager struct {
	name    string
	cmd     *exec.Cmd
	port    int
	certDir string
	mu      sync.Mutex
	out     bytes.Buffer
	exited  chan struct{}
}

func (m *manager) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.Write(p)
}

func (m *manager) log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

func (m *manager) leading() bool { return strings.Contains(m.log(), "Successfully acquired lease") }

type env struct {
	t       *testing.T
	cp      *controlplane.ControlPlane
	c       client.Client
	bin     string
	dir     string
	managed []*manager
}

func TestHA(t *testing.T) {
	g := NewWithT(t)
	e := setup(t)
	ctx := context.Background()

	a, b := e.start("a"), e.start("b")
	g.Expect(e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chain"}}
	p.Spec.MaxAmplification = 27
	p.Spec.Retry.DefaultAttempts = 1
	g.Expect(e.c.Create(ctx, p)).To(Succeed())
	for name, ups := range map[string]string{"gateway": "order=3", "order": "payment=3", "payment": ""} {
		g.Expect(e.c.Create(ctx, deployment(name, ups))).To(Succeed())
	}
	e.eventuallyServices(3, 30*time.Second)
	leader, follower := e.leader(a, b)

	t.Run("SIGKILL of the leader: the follower writes status within the lease", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(leader.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		start := time.Now()
		e.addUpstream("payment", "ledger=2")
		// The lease runs out lease after the last renewal; the follower tries every retry
		// period (jittered up to 2.2x); then one reconcile.
		e.eventuallyServices(4, lease+3*retry+2*time.Second)
		g.Expect(follower.leading()).To(BeTrue())
		t.Logf("status written by the follower %s after the leader's SIGKILL", time.Since(start).Round(10*time.Millisecond))
	})

	c := e.start("c")
	t.Run("SIGTERM of the leader releases the lease: the other takes over within a retry period", func(t *testing.T) {
		g := NewWithT(t)
		e.eventuallyWarm(c)
		g.Expect(follower.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		start := time.Now()
		g.Eventually(follower.exited, 10*time.Second).Should(BeClosed())
		g.Expect(follower.cmd.ProcessState.ExitCode()).To(Equal(0), follower.log())
		e.addUpstream("order", "payment=3, audit=2")
		// Well inside the lease: the lease was released, not left to expire.
		e.eventuallyServices(5, lease)
		g.Expect(c.leading()).To(BeTrue())
		t.Logf("status written by %s %s after the leader's SIGTERM", c.name, time.Since(start).Round(10*time.Millisecond))
	})

	t.Run("a webhook certificate rotated on disk serves the next admission request", func(t *testing.T) {
		g := NewWithT(t)
		before := e.serving(c)
		g.Expect(before).NotTo(BeEmpty())
		serial := writeCert(t, c.certDir)
		g.Eventually(func() string { return e.serving(c) }, 20*time.Second, 50*time.Millisecond).Should(Equal(serial))
		allowed, msg := e.admit(c, "gateway", "yes")
		g.Expect(allowed).To(BeFalse())
		g.Expect(msg).To(Equal(`Deployment ha/gateway: annotation retrycap.dev/inject: value "yes" is not "true" or "false"`))
	})

	d := e.start("d")
	t.Run("the API server killed and started again on the same etcd", func(t *testing.T) {
		g := NewWithT(t)
		e.eventuallyWarm(d)
		e.restartAPIServer(renew + 2*time.Second) // longer than the renew deadline: the leader steps down
		e.addUpstream("gateway", "order=3, archive=2")
		e.eventuallyServices(6, 60*time.Second)
		// Admission on every replica that is up (at least one), judged from a live cache: the
		// policy's namespace is known and the malformed value is refused.
		up := 0
		for _, m := range []*manager{c, d} {
			if allowed, msg := e.admit(m, "gateway", "yes"); !allowed && strings.Contains(msg, "retrycap.dev/inject") {
				up++
			}
		}
		g.Expect(up).To(BeNumerically(">=", 1))
		// The leader could not renew within the deadline: it re-executed itself in place
		// (--on-leader-lost=restart), and is back serving admission from a new cache.
		restarts := strings.Count(c.log(), "restarting in place") + strings.Count(d.log(), "restarting in place")
		g.Expect(restarts).To(Equal(1), "restarts in place")
		e.eventuallyWarm(c)
		e.eventuallyWarm(d)
		t.Logf("admission served by %d of 2 replicas right after the change; restarts in place: c %d, d %d; both serve again", up,
			strings.Count(c.log(), "restarting in place"), strings.Count(d.log(), "restarting in place"))
	})
}

func setup(t *testing.T) *env {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c, err := client.New(cp.Config, client.Options{Scheme: retrycapscheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = cp.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/manager: %v\n%s", err, out)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "retrycap-system"}}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cp: cp, c: c, bin: bin, dir: dir}
}

// start runs a manager with leader election on the short leases, serving webhooks on its own
// loopback port with its own certificate.
func (e *env) start(name string) *manager {
	e.t.Helper()
	m := &manager{name: name, port: freePort(e.t), certDir: filepath.Join(e.dir, "certs-"+name), exited: make(chan struct{})}
	if err := os.MkdirAll(m.certDir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	writeCert(e.t, m.certDir)
	m.cmd = exec.Command(e.bin, "--kubeconfig", e.cp.Kubeconfig, "--namespace", "retrycap-system",
		"--leader-elect", "--leader-elect-lease-duration", lease.String(), "--leader-elect-renew-deadline", renew.String(),
		"--leader-elect-retry-period", retry.String(),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--webhook-host", "127.0.0.1", "--webhook-port", strconv.Itoa(m.port), "--webhook-cert-dir", m.certDir)
	m.cmd.Stdout, m.cmd.Stderr = m, m
	if err := m.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = m.cmd.Wait(); close(m.exited) }()
	e.t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.exited
		if e.t.Failed() {
			e.t.Logf("manager %s:\n%s", m.name, m.log())
		}
	})
	e.managed = append(e.managed, m)
	return m
}

// leader returns the one of a and b that holds the lease, and the other.
func (e *env) leader(a, b *manager) (*manager, *manager) {
	e.t.Helper()
	NewWithT(e.t).Eventually(func() bool { return a.leading() || b.leading() }, 30*time.Second, 50*time.Millisecond).Should(BeTrue())
	if a.leading() {
		NewWithT(e.t).Expect(b.leading()).To(BeFalse())
		return a, b
	}
	return b, a
}

// eventuallyWarm waits until m serves admission requests from a synced cache.
func (e *env) eventuallyWarm(m *manager) {
	e.t.Helper()
	NewWithT(e.t).Eventually(func() bool {
		allowed, msg := e.admit(m, "gateway", "yes")
		return !allowed && strings.Contains(msg, "retrycap.dev/inject")
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
}

func (e *env) eventuallyServices(n int32, within time.Duration) {
	e.t.Helper()
	NewWithT(e.t).Eventually(func() int32 {
		var p v1alpha1.RetryPolicy
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "chain"}, &p); err != nil {
			return -1
		}
		return p.Status.Services
	}, within, 20*time.Millisecond).Should(Equal(n))
}

// addUpstream sets a Deployment's upstreams (a new service in the policy's graph).
func (e *env) addUpstream(name, ups string) {
	e.t.Helper()
	NewWithT(e.t).Eventually(func() error {
		var d appsv1.Deployment
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations["retrycap.dev/upstreams"] = ups
		return e.c.Update(context.Background(), &d)
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
}

// serving returns the serial number of the certificate m's webhook server presents.
func (e *env) serving(m *manager) string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)),
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the certificate presented
	if err != nil {
		return ""
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// admit sends m's gate an AdmissionReview of a create of Deployment name with
// retrycap.dev/inject: inject on its pod template.
func (e *env) admit(m *manager, name, inject string) (bool, string) {
	d := deployment(name, "order=1")
	d.Spec.Template.Annotations["retrycap.dev/inject"] = inject
	raw, _ := json.Marshal(d)
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: ns, Name: name,
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
	body, _ := json.Marshal(review)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed
	resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d/gate-workloads", m.port), "application/json", bytes.NewReader(body))
	if err != nil {
		return true, err.Error()
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		return true, fmt.Sprintf("decoding the answer: %v", err)
	}
	msg := ""
	if out.Response.Result != nil {
		msg = out.Response.Result.Message
	}
	return out.Response.Allowed, msg
}

// restartAPIServer kills kube-apiserver and, after outage, starts it again with the same
// command line and environment: same port, certificates and etcd.
func (e *env) restartAPIServer(outage time.Duration) {
	e.t.Helper()
	pid := childPID(e.t, "kube-apiserver")
	argv := readNul(e.t, fmt.Sprintf("/proc/%d/cmdline", pid))
	environ := readNul(e.t, fmt.Sprintf("/proc/%d/environ", pid))
	proc, _ := os.FindProcess(pid)
	if err := proc.Signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	NewWithT(e.t).Eventually(func() error {
		return e.c.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	}, 10*time.Second, 50*time.Millisecond).ShouldNot(Succeed())
	time.Sleep(outage) // the outage itself, not a synchronisation
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = environ
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	NewWithT(e.t).Eventually(func() error {
		return e.c.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
}

func deployment(name, ups string) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": name}
	ann := map[string]string{}
	if ups != "" {
		ann["retrycap.dev/upstreams"] = ups
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			},
		},
	}
}

var serialMu sync.Mutex
var nextSerial int64 = 100

// writeCert writes a new self-signed tls.crt/tls.key for 127.0.0.1 into dir, each through a
// rename (as the kubelet updates a mounted Secret), and returns its serial number.
func writeCert(t *testing.T, dir string) string {
	t.Helper()
	serialMu.Lock()
	nextSerial++
	serial := big.NewInt(nextSerial)
	serialMu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "retrycap-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return serial.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// childPID is the pid of this process's child named comm (envtest starts the control plane).
func childPID(t *testing.T, comm string) int {
	t.Helper()
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < 0 || s[open+1:end] != comm {
			continue
		}
		if f := strings.Fields(s[end+1:]); len(f) > 1 && f[1] == strconv.Itoa(me) {
			return pid
		}
	}
	t.Fatalf("no child process %s", comm)
	return 0
}

func readNul(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
