// Package node is the e2e suite on a real single-node cluster (hack/node.sh): the chart installed
// with the real helm, the samples' status, the admission gate refusing over-cap Deployments
// through its Service, and injected pods running with the native sidecar under a real kubelet,
// containerd and runc; the storm lab's chain over HTTP (storm_test.go) and gRPC (grpc_test.go), a
// rolling update under load and the sidecar's footprint (roll_test.go), the leader's pod
// deleted (leader_test.go), pods as people write them injected and run (pods_test.go):
// docs/development.md lists the steps. It runs in its own step of
// `make test` (make test-node sets RETRYCAP_NODE_E2E=1); under `go test ./...` it says so and
// skips. On a machine that cannot run
// the node at all (not root, no cgroups: `hack/node.sh check`) it says why, once, and skips; a node
// that fails to start is a failure with the reason. Whatever happens, the node is torn down and
// the suite checks that nothing is left behind (processes, network namespace, mounts, cgroups).
package node
