package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const modulePath = "github.com/retrycap/retrycap"

// Options says what to install into the control plane.
type Options struct {
	// Webhooks installs the webhook configurations from config/webhook, pointed at a local
	// serving host and port with a generated CA (see ControlPlane.WebhookServing).
	Webhooks bool
	// CRDPaths are more CRD files or directories to install beside retrycap's (the mesh APIs'
	// from internal/mesh/crds).
	CRDPaths []string
	// ProgressTo receives the binary build's progress on a machine that has not built them yet.
	// Nil means os.Stderr.
	ProgressTo *os.File
}

// ControlPlane is a running kube-apiserver + etcd with the retrycap CRDs installed.
type ControlPlane struct {
	Env *envtest.Environment
	// Config is an admin rest.Config for in-process clients.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig for kubectl.
	Kubeconfig string
	// Kubectl is the path of the kubectl built alongside the API server.
	Kubectl string
	// RepoRoot is the repository the CRDs and webhook manifests were read from.
	RepoRoot string

	dir string
}

// WebhookServing is where the manager must serve webhooks so the API server reaches them.
type WebhookServing struct {
	Host    string
	Port    int
	CertDir string
}

// RepoRoot finds the retrycap repository by walking up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod of module " + modulePath + " above the working directory; run from the retrycap repository")
		}
		dir = parent
	}
}

// AssetsDir returns the directory holding kube-apiserver, etcd and kubectl: KUBEBUILDER_ASSETS
// when it holds them, else the cache that hack/kube-bins.sh fills (building on first use).
func AssetsDir(root string, progress *os.File) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" && hasBinaries(dir) {
		return dir, nil
	}
	if progress == nil {
		progress = os.Stderr
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "kube-bins.sh"))
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the control-plane binaries with hack/kube-bins.sh: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if !hasBinaries(dir) {
		return "", fmt.Errorf("hack/kube-bins.sh printed %q, which does not hold kube-apiserver, etcd and kubectl", dir)
	}
	return dir, nil
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			return false
		}
	}
	return true
}

// Start builds (or finds) the binaries, starts the control plane and installs the CRDs.
func Start(opts Options) (*ControlPlane, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := AssetsDir(root, opts.ProgressTo)
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        append([]string{filepath.Join(root, "config", "crd", "bases")}, opts.CRDPaths...),
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if !hasDefaultRoute() {
		// kube-apiserver picks the address it advertises from the default route and refuses to
		// start without one ("Unable to find suitable network address ... no default routes
		// found"): a laptop offline or a sandbox with loopback only. Loopback is refused as an
		// advertised address unless the apiserver stops maintaining the kubernetes Service's
		// endpoints, which nothing here reads (every client uses the kubeconfig).
		env.ControlPlane.GetAPIServer().Configure().
			Set("advertise-address", "127.0.0.1").
			Set("endpoint-reconciler-type", "none")
	}
	if opts.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
			LocalServingHost: "127.0.0.1",
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	cp := &ControlPlane{Env: env, Config: cfg, Kubectl: filepath.Join(assets, "kubectl"), RepoRoot: root}
	if err := cp.writeKubeconfig(); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) writeKubeconfig() error {
	user, err := cp.Env.AddUser(envtest.User{Name: "retrycap-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding an admin user for kubectl: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering the kubeconfig: %w", err)
	}
	cp.dir, err = os.MkdirTemp("", "retrycap-controlplane-")
	if err != nil {
		return fmt.Errorf("creating the kubeconfig directory: %w", err)
	}
	cp.Kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", cp.Kubeconfig, err)
	}
	return nil
}

// WebhookServing says where the manager must serve the webhooks the control plane calls.
func (cp *ControlPlane) WebhookServing() WebhookServing {
	o := cp.Env.WebhookInstallOptions
	return WebhookServing{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir}
}

// RunKubectl runs the built kubectl against the control plane, with stdin if given, and returns
// its stdout and stderr. A non-zero exit is returned as an *exec.ExitError with the output.
func (cp *ControlPlane) RunKubectl(ctx context.Context, stdin string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, cp.Kubectl, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), err
}

// Stop stops the API server and etcd and removes the kubeconfig.
func (cp *ControlPlane) Stop() error {
	err := cp.Env.Stop()
	if cp.dir != "" {
		_ = os.RemoveAll(cp.dir)
	}
	if err != nil {
		return fmt.Errorf("stopping the control plane: %w", err)
	}
	return nil
}

// hasDefaultRoute says whether the host has an IPv4 or IPv6 default route, as kube-apiserver
// looks for one (/proc/net/route, /proc/net/ipv6_route); true when neither file can be read
// (not Linux: leave the API server's own choice alone).
func hasDefaultRoute() bool {
	v4, err4 := os.ReadFile("/proc/net/route")
	v6, err6 := os.ReadFile("/proc/net/ipv6_route")
	if err4 != nil && err6 != nil {
		return true
	}
	for i, line := range strings.Split(string(v4), "\n") {
		f := strings.Fields(line)
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...: a default route has
		// destination and mask 0.
		if i > 0 && len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			return true
		}
	}
	for _, line := range strings.Split(string(v6), "\n") {
		f := strings.Fields(line)
		// destination, its prefix length, ..., device: ::/0 on a device other than lo.
		if len(f) >= 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
			return true
		}
	}
	return false
}
