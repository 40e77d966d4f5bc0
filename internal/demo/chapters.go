package demo

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
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
		`{range .spec.containers[*]}app container {.name}: {range .env[*]}{.name}={.value} {end}{"\n"}{end}`)
	return err
}
