// Command managerscale measures the retrycap manager against a real kube-apiserver + etcd with
// many Deployments of realistic size: the manager's peak RSS once every policy's status is
// written, the time until then, and one change's latency (a workload's upstreams changed until
// its policy's status shows it), beside the API server's RSS. It runs each manager binary given
// (e.g. the base commit's and the current one) on the same objects. See
// docs/benchmarks/manager-scale.md.
//
//	go build -o /tmp/mgr-after ./cmd/manager
//	KUBEBUILDER_ASSETS="$(bash hack/kube-bins.sh)" go run ./hack/managerscale \
//	    -bin before=/tmp/mgr-before -bin after=/tmp/mgr-after -sizes 0,1000,5000,20000 -namespaces 10,1
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/controlplane"
	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
)

var pprofAddr string

// rollouts is how many new services are created and deleted per run (-rollouts).
var rollouts int

// binEnv are extra environment variables per binary label ("label=KEY=VALUE", repeatable): e.g.
// client-go's feature gates (KUBE_FEATURE_WatchListClient=false) to compare a manager's initial
// sync with and without a feature on the same objects.
var binEnv = map[string][]string{}

type envFlag struct{}

func (envFlag) String() string { return "" }
func (envFlag) Set(v string) error {
	label, kv, ok := strings.Cut(v, "=")
	if !ok || !strings.Contains(kv, "=") {
		return fmt.Errorf("-binenv %q: want label=KEY=VALUE", v)
	}
	binEnv[label] = append(binEnv[label], kv)
	return nil
}

type binFlag []string

func (b *binFlag) String() string     { return strings.Join(*b, ",") }
func (b *binFlag) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var bins binFlag
	flag.Var(&bins, "bin", "label=path of a manager binary to measure (repeat)")
	sizes := flag.String("sizes", "0,1000,5000,20000", "numbers of Deployments")
	layouts := flag.String("namespaces", "10,1", "numbers of namespaces the Deployments are spread over")
	changes := flag.Int("changes", 5, "changes measured per run")
	flag.IntVar(&rollouts, "rollouts", 0, "Deployments of a new service created, then deleted, measured per run (each until the status counts it)")
	flag.Var(envFlag{}, "binenv", "label=KEY=VALUE: an environment variable for the binary of that label (repeat)")
	flag.StringVar(&pprofAddr, "pprof", "", "serve the managers' pprof on this address and write heap profiles to /tmp/managerscale-heap-LABEL-N.pb.gz")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "give at least one -bin label=path")
		os.Exit(2)
	}
	for _, l := range strings.Split(*layouts, ",") {
		nss, _ := strconv.Atoi(l)
		for _, s := range strings.Split(*sizes, ",") {
			n, _ := strconv.Atoi(s)
			if n == 0 && nss != 1 {
				continue // idle: once
			}
			if err := runConfig(bins, n, nss, *changes); err != nil {
				fmt.Fprintln(os.Stderr, "managerscale:", err)
				os.Exit(1)
			}
		}
	}
}

func runConfig(bins []string, n, nss, changes int) error {
	ctx := context.Background()
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = -1, 1000
	c, err := client.New(&cfg, client.Options{Scheme: retrycapscheme.New()})
	if err != nil {
		return err
	}
	per := n / nss
	if n == 0 {
		per = 0
	}
	t0 := time.Now()
	for k := 0; k < nss; k++ {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(k)}}); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "retrycap-system"}}); err != nil {
		return err
	}
	jobs := make(chan [2]int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := c.Create(ctx, deployment(nsName(j[0]), j[1], per)); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for k := 0; k < nss; k++ {
		for i := 0; i < per; i++ {
			jobs <- [2]int{k, i}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("creating Deployments: %w", err)
	default:
	}
	size := 0
	if per > 0 {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: nsName(0), Name: svc(0)}, &d); err != nil {
			return err
		}
		b, _ := json.Marshal(&d)
		size = len(b)
	}
	apiPID := childPID("kube-apiserver")
	fmt.Printf("## %d Deployments in %d namespace(s) (%d bytes each as stored; created in %s); kube-apiserver RSS %.0f MiB\n",
		n, nss, size, time.Since(t0).Round(time.Second), rssMiB(apiPID, "VmRSS"))
	if n > 0 {
		if err := anchors(ctx, &cfg); err != nil {
			return err
		}
	}

	certDir, err := os.MkdirTemp("", "managerscale-certs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(certDir)
	if err := writeCert(certDir); err != nil {
		return err
	}
	for _, b := range bins {
		label, bin, _ := strings.Cut(b, "=")
		if err := runManager(ctx, c, cp.Kubeconfig, certDir, label, bin, nss, per, changes, apiPID); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
	}
	return nil
}

// anchors times what any client of this API server pays for the Deployments, the floor under
// a manager's time to status: one typed List of them all (JSON decoded; resourceVersion "0",
// from the watch cache, what an informer's list asks for), the same in pages of 500 (from etcd),
// and a metadata-only List. A client of its own, with the rate limit off.
func anchors(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: retrycapscheme.New()})
	if err != nil {
		return err
	}
	var out []string
	for _, a := range []struct {
		name string
		list func() (int, error)
	}{
		{"typed List rv=0", func() (int, error) {
			var l appsv1.DeploymentList
			err := c.List(ctx, &l, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
			return len(l.Items), err
		}},
		{"typed List pages of 500", func() (int, error) {
			n := 0
			opts := &client.ListOptions{Limit: 500}
			for {
				var l appsv1.DeploymentList
				if err := c.List(ctx, &l, opts); err != nil {
					return n, err
				}
				n += len(l.Items)
				if l.Continue == "" {
					return n, nil
				}
				opts.Continue = l.Continue
			}
		}},
		{"metadata List rv=0", func() (int, error) {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
			err := c.List(ctx, l, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
			return len(l.Items), err
		}},
	} {
		t := time.Now()
		n, err := a.list()
		if err != nil {
			return fmt.Errorf("anchor %s: %w", a.name, err)
		}
		out = append(out, fmt.Sprintf("%s %.2fs (%d)", a.name, time.Since(t).Seconds(), n))
	}
	fmt.Printf("anchor   %s; load %s\n", strings.Join(out, ", "), loadAvg())
	return nil
}

// loadAvg is the 1-minute load average.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func runManager(ctx context.Context, c client.Client, kubeconfig, certDir, label, bin string, nss, per, changes, apiPID int) error {
	// Fresh policies: the time to status counts from no status at all.
	for k := 0; k < nss; k++ {
		p := policy(nsName(k))
		_ = c.Delete(ctx, p)
		if err := c.Create(ctx, policy(nsName(k))); err != nil {
			return err
		}
	}
	port := freePort()
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", "retrycap-system",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--webhook-port", strconv.Itoa(port), "--webhook-cert-dir", certDir, "--zap-log-level", "error")
	metricsAddr := ""
	if pprofAddr != "" {
		// A free port for /metrics: a fixed one may be another process's on a shared machine
		// (the manager then exits at once and the run waits for a status that never comes).
		metricsAddr = fmt.Sprintf("127.0.0.1:%d", freePort())
		cmd.Args = append(cmd.Args, "--pprof-bind-address", pprofAddr, "--metrics-bind-address", metricsAddr)
	}
	cmd.Stderr, cmd.Stdout = nil, nil
	if env := binEnv[label]; len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Every policy's status written, with the graph of all its workloads.
	want := int32(per)
	for {
		done := 0
		for k := 0; k < nss; k++ {
			var p v1alpha1.RetryPolicy
			if err := c.Get(ctx, client.ObjectKey{Namespace: nsName(k), Name: "chain"}, &p); err == nil && p.Status.ObservedGeneration > 0 && p.Status.Services >= want {
				done++
			}
		}
		if done == nss {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("statuses not written after 10 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	toStatus := time.Since(start)
	time.Sleep(5 * time.Second) // let the heap settle, then read the peak
	peak, rss := rssMiB(cmd.Process.Pid, "VmHWM"), rssMiB(cmd.Process.Pid, "VmRSS")

	var lat []time.Duration
	cpuDone := make(chan struct{})
	if pprofAddr != "" && per > 0 {
		// A CPU profile over the changes.
		go func() {
			defer close(cpuDone)
			saveProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, 1+changes/4), fmt.Sprintf("/tmp/managerscale-cpu-%s-%d.pb.gz", label, per*nss))
		}()
	} else {
		close(cpuDone)
	}
	if per > 0 {
		for i := 0; i < changes; i++ {
			d, err := oneChange(ctx, c, per, i)
			if err != nil {
				return err
			}
			lat = append(lat, d)
		}
	}
	<-cpuDone
	var adds, dels []time.Duration
	for i := 0; i < rollouts && per > 0; i++ {
		a, d, err := oneRollout(ctx, c, per, i)
		if err != nil {
			return err
		}
		adds, dels = append(adds, a), append(dels, d)
	}
	if len(adds) > 0 {
		sort.Slice(adds, func(i, j int) bool { return adds[i] < adds[j] })
		sort.Slice(dels, func(i, j int) bool { return dels[i] < dels[j] })
		fmt.Printf("%-8s new service created: median %6.1f ms %v; deleted: median %6.1f ms %v  load %s\n", label,
			float64(adds[len(adds)/2].Microseconds())/1000, roundAll(adds), float64(dels[len(dels)/2].Microseconds())/1000, roundAll(dels), loadAvg())
	}
	if pprofAddr != "" {
		saveProfile(fmt.Sprintf("http://%s/debug/pprof/heap", pprofAddr), fmt.Sprintf("/tmp/managerscale-heap-%s-%d.pb.gz", label, per*nss))
		saveProfile("http://"+metricsAddr+"/metrics", fmt.Sprintf("/tmp/managerscale-metrics-%s-%d.txt", label, per*nss))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	med := time.Duration(0)
	if len(lat) > 0 {
		med = lat[len(lat)/2]
	}
	fmt.Printf("%-8s status of %d policies in %6.2fs  manager peak RSS %6.1f MiB (now %6.1f)  change latency median %6.1f ms %v  kube-apiserver RSS %.0f MiB  load %s\n",
		label, nss, toStatus.Seconds(), peak, rss, float64(med.Microseconds())/1000, roundAll(lat), rssMiB(apiPID, "VmRSS"), loadAvg())
	_ = cmd.Process.Signal(syscall.SIGTERM)
	return nil
}

// oneChange gives the last workload of namespace 0 one more upstream (a new service) and waits
// until the policy's status counts it.
func oneChange(ctx context.Context, c client.Client, per, i int) (time.Duration, error) {
	var p v1alpha1.RetryPolicy
	key := client.ObjectKey{Namespace: nsName(0), Name: "chain"}
	if err := c.Get(ctx, key, &p); err != nil {
		return 0, err
	}
	before := p.Status.Services
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsName(0), Name: svc(per - 1)}, &d); err != nil {
		return 0, err
	}
	// One more upstream each time: one more service in the status.
	next := fmt.Sprintf("extra-%d-%d=2", time.Now().UnixNano(), i)
	if old := d.Spec.Template.Annotations["retrycap.dev/upstreams"]; old != "" {
		next = old + ", " + next
	}
	d.Spec.Template.Annotations["retrycap.dev/upstreams"] = next
	start := time.Now()
	if err := c.Update(ctx, &d); err != nil {
		return 0, err
	}
	for time.Since(start) < time.Minute {
		if err := c.Get(ctx, key, &p); err == nil && p.Status.Services == before+1 {
			return time.Since(start), nil
		}
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("change %d not in the status after a minute (services %d, want %d)", i, p.Status.Services, before+1)
}

// oneRollout creates a Deployment of a new service in namespace 0 (no upstreams; the policy
// selects it) and waits until the policy's status counts one more service, then deletes it and
// waits until the count is back: the latencies of both.
func oneRollout(ctx context.Context, c client.Client, per, i int) (add, del time.Duration, err error) {
	var p v1alpha1.RetryPolicy
	key := client.ObjectKey{Namespace: nsName(0), Name: "chain"}
	if err := c.Get(ctx, key, &p); err != nil {
		return 0, 0, err
	}
	before := p.Status.Services
	d := deployment(nsName(0), per+1000+i, per)
	wait := func(want int32) (time.Duration, error) {
		start := time.Now()
		for time.Since(start) < time.Minute {
			if err := c.Get(ctx, key, &p); err == nil && p.Status.Services == want {
				return time.Since(start), nil
			}
			time.Sleep(time.Millisecond)
		}
		return 0, fmt.Errorf("rollout %d: status counts %d services after a minute, want %d", i, p.Status.Services, want)
	}
	start := time.Now()
	if err := c.Create(ctx, d); err != nil {
		return 0, 0, err
	}
	if _, err := wait(before + 1); err != nil {
		return 0, 0, err
	}
	add = time.Since(start)
	start = time.Now()
	if err := c.Delete(ctx, d); err != nil {
		return 0, 0, err
	}
	if _, err := wait(before); err != nil {
		return 0, 0, err
	}
	return add, time.Since(start), nil
}

func saveProfile(url, path string) {
	resp, err := http.Get(url) //nolint:gosec,noctx // a local benchmark
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(path, b, 0o600)
}

func roundAll(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%.0f", float64(d.Microseconds())/1000)
	}
	return out
}

func nsName(k int) string { return fmt.Sprintf("scale-%02d", k) }
func svc(i int) string    { return fmt.Sprintf("svc-%05d", i) }

func policy(ns string) *v1alpha1.RetryPolicy {
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chain"}}
	p.Spec.MaxAmplification = 16
	p.Spec.Enforcement = v1alpha1.EnforcementAudit
	p.Spec.Retry.DefaultAttempts = 1
	return p
}

// deployment is workload i of per in ns, with a realistic spec (two containers, env, probes,
// resources, volumes, affinity), and the upstreams of a binary tree: i calls 2i+1 and 2i+2.
func deployment(ns string, i, per int) *appsv1.Deployment {
	name := svc(i)
	var ups []string
	for _, c := range []int{2*i + 1, 2*i + 2} {
		if c < per {
			a := 1
			if c%3 == 0 {
				a = 2
			}
			ups = append(ups, fmt.Sprintf("%s=%d", svc(c), a))
		}
	}
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/version": "1.27.3", "team": "payments"}
	env := []corev1.EnvVar{}
	for k := 0; k < 6; k++ {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("APP_SETTING_%02d", k), Value: fmt.Sprintf("value-%d-of-the-%s-service-configuration", k, name)})
	}
	env = append(env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3}
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	replicas := int32(3)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
			Annotations: map[string]string{"owner": "payments-team@example.com", "runbook": "https://runbooks.example.com/" + name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					"retrycap.dev/upstreams": strings.Join(ups, ", "), "prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.example.com/shop/" + name + ":1.27.3", Env: env,
						Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
						Resources:      res,
						LivenessProbe:  probe("/healthz"),
						ReadinessProbe: probe("/readyz"),
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + name}, {Name: "tmp", MountPath: "/tmp"}},
					}, {
						Name: "log-shipper", Image: "registry.example.com/infra/log-shipper:4.2.0",
						Args:         []string{"--input=/var/log/app", "--output=collector.logging.svc:24224", "--buffer=8MiB"},
						Resources:    res,
						VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/var/log/app"}},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
						Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}}}}}}},
				},
			},
		},
	}
}

// childPID is the pid of this process's child named comm (envtest starts the control plane as
// children), 0 if none.
func childPID(comm string) int {
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 || s[open+1:close] != comm {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) > 1 {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == me {
				return pid
			}
		}
	}
	return 0
}

// rssMiB reads a Vm* line (VmRSS, VmHWM) of /proc/pid/status in MiB.
func rssMiB(pid int, field string) float64 {
	if pid == 0 {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCert writes a self-signed tls.crt/tls.key for 127.0.0.1 (the webhook server needs one to
// start; nothing calls it here).
func writeCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "managerscale"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}
