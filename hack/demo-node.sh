#!/usr/bin/env bash
# `make demo-node`: the demo's story on a real single-node cluster (hack/node.sh) instead of an
# embedded control plane: the chart installed with helm, the samples' policies reporting 27 and
# 18, an over-cap Deployment refused at admission, and the samples' pods running with the
# injected sidecar under a real kubelet. Leaves the node running; `hack/node.sh down` removes it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { printf '\n== %s\n' "$*"; }

kubectl="$(bash hack/kube-bins.sh)/kubectl"
helm="$(bash hack/helm-bin.sh)"
# The status read whole first: `| grep -q` under pipefail fails when grep closes the pipe early.
status="$(bash hack/node.sh status 2>&1 || true)"
if [ -f /run/retrycap-node/kubeconfig ] && [[ $status == *"kubelet running"* ]]; then
  export KUBECONFIG=/run/retrycap-node/kubeconfig
else
  say "starting the node (hack/node.sh up)"
  eval "$(bash hack/node.sh up)"
fi
say "building and loading the images (make images; hack/node.sh load)"
mapfile -t tarballs < <(bash hack/images.sh | awk '{print $2}')
bash hack/node.sh load "${tarballs[@]}"

say "helm install retrycap (self-signed certificates: no cert-manager on the node)"
existed=
"$helm" status retrycap -n retrycap-system >/dev/null 2>&1 && existed=1
"$helm" upgrade --install retrycap charts/retrycap -n retrycap-system --create-namespace \
  --set certificates.mode=self-signed --wait --timeout 8m
if [ -n "$existed" ]; then
  # A re-run loads new images under the same tags: helm changes nothing in the Deployment, and
  # the running managers would go on with the code of the run before.
  "$kubectl" -n retrycap-system rollout restart deployment/retrycap-controller-manager
  "$kubectl" -n retrycap-system rollout status deployment/retrycap-controller-manager --timeout=5m
fi
"$kubectl" -n retrycap-system get deployments,pods -o wide

say "the samples: storm27 (3 x 3 x 3 against cap 4) and incident18 (2 x 3 x 3 against cap 3)"
"$kubectl" apply -f config/samples/storm27.yaml -f config/samples/incident18.yaml
for i in $(seq 1 120); do
  a="$("$kubectl" get retrypolicy storm -n payments -o jsonpath='{.status.amplification}' 2>/dev/null || true)"
  b="$("$kubectl" get retrypolicy checkout -n shop -o jsonpath='{.status.amplification}' 2>/dev/null || true)"
  [ "$a" = 27 ] && [ "$b" = 18 ] && break
  sleep 1
done
"$kubectl" get retrypolicies -A

say "a deploy that makes it worse is refused at admission"
"$kubectl" patch deployment billing -n payments --type merge \
  -p '{"spec":{"template":{"metadata":{"annotations":{"retrycap.dev/upstreams":"payment=5"}}}}}' || true

say "the samples' pods, each with the injected retrycap-proxy as a native sidecar"
# The samples' Deployments were created in the same apply as their policy, before it existed:
# their first pods were admitted without a sidecar ("NoPolicy"). A restart re-creates them
# under the policy, as a team adopting retrycap would do.
mapfile -t old < <("$kubectl" get pods -n payments -o name)
"$kubectl" rollout restart deployment -n payments
"$kubectl" rollout status deployment -n payments --timeout=5m  # waits for the new pods, Ready
# rollout status returns with the old pods still terminating (phase Running, no sidecar): the
# listing below would show them beside the new ones. Wait until they are gone.
if [ "${#old[@]}" -gt 0 ]; then
  "$kubectl" wait -n payments --for=delete "${old[@]}" --timeout=2m
fi
"$kubectl" get pods -n payments -o 'custom-columns=POD:.metadata.name,STATUS:.status.phase,SIDECAR:.spec.initContainers[*].name,RESTART:.spec.initContainers[*].restartPolicy,READY:.status.containerStatuses[*].ready'

# A fresh machine has no kubectl on its PATH: the one the node runs with is named, as make demo does.
say "Your turn: the node stays up; hack/node.sh down removes it"
echo "export KUBECONFIG=$KUBECONFIG"
echo "$kubectl get rp -A"
echo "$kubectl get pods -n payments"
