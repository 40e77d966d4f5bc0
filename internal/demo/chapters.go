package demo

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/*.yaml
var manifests embed.FS

func manifest(name string) string {
	data, err := manifests.ReadFile("manifests/" + name)
	if err != nil {
		panic(fmt.Sprintf("demo manifest %s is not embedded: %v", name, err)) // a build defect, not input
	}
	return string(data)
}

func refuseDeploy(ctx context.Context, d *run) error {
	d.step("Admission refuses a deploy that would push a chain over its cap (enforcement: Reject)")
	if _, err := d.kubectl(ctx, manifest("orders.yaml"), "apply", "-f", "-"); err != nil {
		return err
	}
	out, err := d.kubectl(ctx, manifest("orders-deploy.yaml"), "apply", "-f", "-")
	if err == nil {
		return errors.New("the over-cap deploy of orders/orders was admitted; the gate should have refused it")
	}
	if !strings.Contains(out, "denied the request") {
		return fmt.Errorf("kubectl apply failed for another reason than the gate: %w", err)
	}
	return nil
}

func rewriteDeploy(ctx context.Context, d *run) error {
	d.step("The same deploy under enforcement: Rewrite is admitted with its retries lowered to what fits")
	if _, err := d.kubectl(ctx, "", "patch", "rp", "-n", "orders", "orders", "--type=merge", "-p", `{"spec":{"enforcement":"Rewrite"}}`); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, manifest("orders-deploy.yaml"), "apply", "-f", "-"); err != nil {
		return err
	}
	_, err := d.kubectl(ctx, "", "get", "deploy", "-n", "orders", "orders", "-o",
		`jsonpath=upstreams: {.spec.template.metadata.annotations.retrycap\.dev/upstreams}{"\n"}rewritten-from: {.spec.template.metadata.annotations.retrycap\.dev/rewritten-from}{"\n"}`)
	return err
}

func injectPod(ctx context.Context, d *run) error {
	d.step("A selected pod gets the enforcing proxy as a native sidecar, and its app the proxy settings")
	if _, err := d.kubectl(ctx, manifest("cart-pod.yaml"), "apply", "-f", "-"); err != nil {
		return err
	}
	_, err := d.kubectl(ctx, "", "get", "pod", "-n", "shop", "cart", "-o", `jsonpath=`+
		`injected by: {.metadata.annotations.retrycap\.dev/injected}{"\n"}`+
		`{range .spec.initContainers[*]}sidecar: {.name} (restartPolicy {.restartPolicy}){"\n"}  args: {.args}{"\n"}{end}`+
		// RETRYCAP_POD_IP is set from the downward API: printed as {.value} it read as set to
		// nothing ("RETRYCAP_POD_IP="); the field it comes from is shown instead.
		`{range .spec.containers[*]}app container {.name}: {range .env[?(@.value)]}{.name}={.value} {end}`+
		`{range .env[?(@.valueFrom.fieldRef)]}{.name}=<{.valueFrom.fieldRef.fieldPath}> {end}{"\n"}{end}`)
	return err
}

// refuseChain is the incident itself: three teams, three namespaces, each hop reasonable, one
// chain at 27, refused by a ClusterRetryPolicy whose graph spans the namespaces.
func refuseChain(ctx context.Context, d *run) error {
	d.step("A chain across three teams' namespaces is one chain under a ClusterRetryPolicy (enforcement: Reject)")
	out, err := d.kubectl(ctx, manifest("chain.yaml"), "apply", "-f", "-")
	if err != nil {
		return err
	}
	// The validator may not have seen Deployment web yet (created in the same apply, after the
	// policy): its warning is advisory, and a new user should not read it as a failure.
	if strings.Contains(out, "is not the service of any workload this policy selects (yet)") {
		d.say("(The warning is advisory: the policy was validated before the Deployment web of the same apply reached the manager.)")
	}
	if err := d.waitForGate(ctx, manifest("chain-order.yaml")); err != nil {
		return err
	}
	out, err = d.kubectl(ctx, manifest("chain-order.yaml"), "apply", "-f", "-")
	if err == nil {
		return errors.New("the deploy of orders/order that makes the chain 27 was admitted; the ClusterRetryPolicy should have refused it")
	}
	if !strings.Contains(out, "denied the request: ClusterRetryPolicy teams-chain") {
		return fmt.Errorf("kubectl apply failed for another reason than the cluster policy: %w", err)
	}
	return nil
}

// waitForGate waits until the gate refuses the Deployment of manifest (dry-run creates, polled):
// kubectl apply returns when the API server stored the policy and the workloads, before the
// manager's informers delivered them to the gate's index.
func (d *run) waitForGate(ctx context.Context, manifest string) error {
	var dep appsv1.Deployment
	if err := yaml.Unmarshal([]byte(manifest), &dep); err != nil {
		return fmt.Errorf("demo manifest: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := d.cli.Create(ctx, dep.DeepCopy(), client.DryRunAll)
		if apierrors.IsForbidden(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gate did not refuse Deployment %s/%s within a minute (last answer: %v)", dep.Namespace, dep.Name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
