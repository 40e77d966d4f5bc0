package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/operator"
)

// Options configures a demo run.
type Options struct {
	// Out receives the story.
	Out io.Writer
	// Wait keeps the control plane running after the story until ctx is cancelled (Ctrl-C), so
	// the user can run kubectl against it.
	Wait bool
	// Verbose shows the manager's logs.
	Verbose bool
	// Short runs the storm lab in its short mode (seconds instead of minutes), for CI.
	Short bool
	// ChartPath is where the storm lab's chart is written; empty writes none.
	ChartPath string
	// Command is how the user runs this CLI (bin/retrycap after make demo), for the lines that
	// tell them what to run next; empty: go run ./cmd/retrycap.
	Command string
}

// ManagerNamespace is the namespace the demo's manager pretends to run in.
const ManagerNamespace = "retrycap-system"

// Run tells the story. It returns when the story is done (and, with Wait, ctx is cancelled).
func Run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		return errors.New("demo: Options.Out is nil")
	}
	logf.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	if o.Verbose {
		logf.SetLogger(zap.New(zap.UseDevMode(true)))
	}
	d := &run{out: o.Out, opts: o}
	d.step("Starting the embedded control plane (real kube-apiserver and etcd; the first run on a machine builds them)")
	start := time.Now()
	cp, err := controlplane.Start(controlplane.Options{Webhooks: true})
	if err != nil {
		return d.failed(ctx, err) // Ctrl-C reaches a first run's build of the binaries too
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	d.cp = cp
	d.say("control plane up in %s", time.Since(start).Round(100*time.Millisecond))

	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	// A chapter is not begun once ctx is cancelled: Ctrl-C always stops at the step it came in.
	if err := d.startManager(mgrCtx); err != nil || ctx.Err() != nil {
		return d.failed(ctx, err)
	}

	for _, s := range chapters {
		if err := ctx.Err(); err != nil {
			return d.failed(ctx, err)
		}
		if err := s(ctx, d); err != nil {
			return d.failed(ctx, err)
		}
	}

	d.step("Your turn")
	d.say("export KUBECONFIG=%s", cp.Kubeconfig)
	d.say("%s get rp -A", cp.Kubectl)
	d.say("%s describe rp -n payments storm", cp.Kubectl)
	d.say("%s get crp", cp.Kubectl)
	// retrycap's own view of the same cluster: the README's next step, and what the plugin does.
	d.say("%s graph -A", d.command())
	if !o.Wait {
		return nil
	}
	d.say("The control plane runs until you press Ctrl-C.")
	<-ctx.Done()
	d.say("Stopping.")
	return nil
}

// chapters are the demo's chapters, in the order they are told. The first two are below; the
// admission chapters are in chapters.go and the storm lab in storm.go, so each stays short.
var chapters = []func(context.Context, *run) error{
	applySamples,  // the samples: two incident write-ups
	showPolicies,  // their computed status and violations
	refuseDeploy,  // Reject: an over-cap deploy refused
	rewriteDeploy, // Rewrite: the same deploy admitted, lowered
	injectPod,     // the proxy injected as a native sidecar
	refuseChain,   // ClusterRetryPolicy: a chain across three namespaces refused
	stormLab,      // naive retries against retrycap, real processes
}

// Interrupted is Run's error when ctx was cancelled (Ctrl-C) before the story's end. A chapter
// cut short said only "context canceled" (or, while the manager started, "the manager stopped:
// %!w(<nil>)"), and read as a failure of the demo.
type Interrupted struct {
	// Step is the number of the step that was running, as printed ("== 8. ...").
	Step int
}

func (e *Interrupted) Error() string {
	return fmt.Sprintf("interrupted during step %d; the control plane and every process the demo started are stopped", e.Step)
}

// failed is a chapter's error, or Interrupted when ctx was cancelled: whatever a chapter cut
// short returns then is a consequence of the interruption, not news.
func (d *run) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &Interrupted{Step: d.n}
	}
	return err
}

type run struct {
	opts Options
	out  io.Writer
	cp   *controlplane.ControlPlane
	cli  client.Client
	n    int
}

// command is how the user runs this CLI, for the lines that say what to run next.
func (d *run) command() string {
	if d.opts.Command == "" {
		return "go run ./cmd/retrycap"
	}
	return d.opts.Command
}

func (d *run) step(title string) {
	d.n++
	fmt.Fprintf(d.out, "\n== %d. %s\n", d.n, title)
}

func (d *run) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// kubectl runs the real kubectl and prints the command line and its output, as a user would see it.
func (d *run) kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	fmt.Fprintf(d.out, "$ kubectl %s\n", shellJoin(args))
	out, stderr, err := d.cp.RunKubectl(ctx, stdin, args...)
	fmt.Fprint(d.out, out)
	fmt.Fprint(d.out, stderr)
	return out + stderr, err
}

// shellJoin writes args as a shell command line a user can paste: an argument with a character
// the shell reads (space, quote, brace, bracket, $, backslash) is single-quoted. Joined bare, the patch
// reached kubectl as {spec:{enforcement:Rewrite}} and the jsonpath templates split at each space.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if a == "" || strings.IndexFunc(a, func(r rune) bool { return !shellSafe(r) }) >= 0 {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

func shellSafe(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r)
}

func (d *run) startManager(ctx context.Context) error {
	ws := d.cp.WebhookServing()
	mgr, err := operator.NewManager(d.cp.Config, operator.Options{
		MetricsAddr:    "0",
		ProbeAddr:      "0",
		Webhooks:       true,
		WebhookHost:    ws.Host,
		WebhookPort:    ws.Port,
		WebhookCertDir: ws.CertDir,
		Namespace:      ManagerNamespace,
	})
	if err != nil {
		return err
	}
	d.cli = mgr.GetClient()
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	deadline := time.After(time.Minute)
	started := mgr.GetWebhookServer().StartedChecker()
	for {
		select {
		case err := <-errc:
			if err == nil { // ctx was cancelled: Start returns nil then
				return ctx.Err()
			}
			return fmt.Errorf("the manager stopped: %w", err)
		case <-deadline:
			return errors.New("the manager's webhook server did not start within a minute")
		case <-time.After(50 * time.Millisecond):
		}
		if started(nil) == nil && mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
	}
}

func applySamples(ctx context.Context, d *run) error {
	d.step("Applying the samples: two incident write-ups as namespaces, Deployments and a RetryPolicy each, and a chain across three namespaces under a ClusterRetryPolicy")
	_, err := d.kubectl(ctx, "", "apply", "-k", filepath.Join(d.cp.RepoRoot, "config", "samples"))
	return err
}

func showPolicies(ctx context.Context, d *run) error {
	d.step("The controller computed each policy's worst-case retry multiplication")
	if err := d.waitForStatus(ctx, "shop", "checkout"); err != nil {
		return err
	}
	if err := d.waitForStatus(ctx, "payments", "storm"); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, "", "get", "rp", "-A"); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, "", "get", "rp", "-n", "payments", "storm", "-o", "jsonpath={range .status.violations[*]}{.message}{\"\\n  suggestion: \"}{.suggestion}{\"\\n\"}{end}"); err != nil {
		return err
	}
	// The samples' cluster policy, as docs/cluster-policies.md shows it.
	if err := d.waitForStatus(ctx, "", "checkout-chain"); err != nil {
		return err
	}
	_, err := d.kubectl(ctx, "", "get", "crp")
	return err
}

// waitForStatus waits until the controller has computed the policy's status for its generation:
// a RetryPolicy ns/name, or with ns empty the ClusterRetryPolicy name.
func (d *run) waitForStatus(ctx context.Context, ns, name string) error {
	deadline := time.Now().Add(time.Minute)
	kind, ref := "RetryPolicy", ns+"/"+name
	if ns == "" {
		kind, ref = "ClusterRetryPolicy", name
	}
	for {
		var (
			om  metav1.ObjectMeta
			st  v1alpha1.RetryPolicyStatus
			err error
		)
		if ns == "" {
			var p v1alpha1.ClusterRetryPolicy
			err = d.cli.Get(ctx, client.ObjectKey{Name: name}, &p)
			om, st = p.ObjectMeta, p.Status
		} else {
			var p v1alpha1.RetryPolicy
			err = d.cli.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
			om, st = p.ObjectMeta, p.Status
		}
		if err == nil && st.ObservedGeneration == om.Generation && meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWithinCap) != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s: no status from the controller within a minute (last error: %v)", kind, ref, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
