package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/controlplane"
)

// TestHelmUpgradeKeepsTheWebhooksPointed installs the chart for real (self-signed certificates:
// the control plane has no cert-manager) and runs `helm upgrade` over it with changed values,
// as docs/upgrading.md says: every object the API server needs to reach the webhooks (the two
// webhook configurations, the Service, the serving certificate's Secret), the CRDs and the
// policies stored under them are patched in place or left alone,
// never deleted and created again (same UIDs), and the CA every webhook trusts is still the one
// that signed the Secret's certificate, so there is no moment when a webhook points at nothing
// or at a certificate it does not trust. The control plane runs no pods: that the manager's
// replicas roll one at a time (maxUnavailable 0) is checked on the Deployment as stored.
func TestHelmUpgradeKeepsTheWebhooksPointed(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string {
		t.Helper()
		out, errOut, err := cp.RunKubectl(ctx, "", args...)
		if err != nil {
			t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		return out
	}
	helm, root := helmBinary(t)
	runHelm := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, helm, append(args, helmRelease, filepath.Join(root, "charts", "retrycap"), "--namespace", installNamespace)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// What the API server's path to the webhooks is made of, one line per object or webhook.
	const (
		uids     = `{range .items[*]}{.kind}/{.metadata.name} {.metadata.uid}{"\n"}{end}`
		webhooks = `{range .items[*]}{range .webhooks[*]}{.name} {.clientConfig.service.namespace}/{.clientConfig.service.name}:{.clientConfig.service.port}{.clientConfig.service.path} {.clientConfig.caBundle}{"\n"}{end}{end}`
	)
	snapshot := func() (objects, paths, ca, cert string) {
		objects = kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "jsonpath="+uids) +
			kubectl("get", "service/retrycap-webhook-service", "secret/webhook-server-cert", "-n", installNamespace, "-o", "jsonpath="+uids) +
			kubectl("get", "customresourcedefinitions", "retrypolicies.retrycap.dev", "clusterretrypolicies.retrycap.dev", "-o", "jsonpath="+uids) +
			kubectl("get", "retrypolicies", "-A", "-o", "jsonpath="+uids)
		paths = kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "jsonpath="+webhooks)
		ca = kubectl("get", "secret", "webhook-server-cert", "-n", installNamespace, "-o", `jsonpath={.data.ca\.crt}`)
		cert = kubectl("get", "secret", "webhook-server-cert", "-n", installNamespace, "-o", `jsonpath={.data.tls\.crt}`)
		return
	}
	timeouts := func() string {
		return kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", `jsonpath={.items[*].webhooks[*].timeoutSeconds}`)
	}

	// A team's policy, stored before the chart's validating webhook exists (nothing serves it
	// here): the upgrade must keep it, so must keep the CRDs.
	if _, errOut, err := cp.RunKubectl(ctx, `{"apiVersion":"retrycap.dev/v1alpha1","kind":"RetryPolicy","metadata":{"name":"checkout","namespace":"default"},"spec":{"maxAmplification":4}}`, "create", "-f", "-"); err != nil {
		t.Fatalf("creating a RetryPolicy: %v\n%s", err, errOut)
	}
	// --take-ownership: the control plane installed the CRDs without Helm's labels.
	runHelm("install", "--take-ownership", "--create-namespace", "--set", "certificates.mode=self-signed")
	objects, paths, ca, cert := snapshot()
	// Four webhooks of the chart, each with the Secret's CA; the Service and the Secret.
	if n := strings.Count(paths, "\n"); n != 4 || strings.Count(paths, " "+ca+"\n") != 4 || ca == "" || cert == "" {
		t.Fatalf("after helm install: webhooks\n%sSecret ca.crt %q, tls.crt %d bytes: want 4 webhooks trusting the Secret's CA", paths, ca, len(cert))
	}
	if got := timeouts(); got != "5 5 5 5" {
		t.Fatalf("after helm install: timeoutSeconds %q, want the default 5 on each webhook", got)
	}

	runHelm("upgrade", "--reuse-values", "--set", "replicas=3,webhooks.timeoutSeconds=10")
	if got := timeouts(); got != "10 10 10 10" {
		t.Fatalf("after helm upgrade: timeoutSeconds %q, want 10 on each webhook (the upgrade did not apply)", got)
	}
	objects2, paths2, ca2, cert2 := snapshot()
	if objects2 != objects {
		t.Errorf("helm upgrade replaced objects (UIDs before, after):\n%s\n%s", objects, objects2)
	}
	if paths2 != paths {
		t.Errorf("helm upgrade changed where the webhooks point or whom they trust:\n%s\n%s", paths, paths2)
	}
	if ca2 != ca || cert2 != cert {
		t.Errorf("helm upgrade generated a new certificate (self-signed mode reads the Secret back)")
	}
	if got := kubectl("get", "deployment", "retrycap-controller-manager", "-n", installNamespace, "-o", "jsonpath={.spec.replicas} {.spec.strategy.rollingUpdate.maxUnavailable}"); got != "3 0" {
		t.Errorf("after helm upgrade: the manager's replicas and maxUnavailable %q, want \"3 0\"", got)
	}
}
