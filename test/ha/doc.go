// Package ha tests the manager as it runs in a cluster: several cmd/manager processes (built by
// the test) against one real kube-apiserver + etcd, with leader election on short leases. The
// leader killed (SIGKILL) and stopped (SIGTERM), the webhook certificate rotated on disk, and the
// API server killed and started again on the same etcd while two managers run.
package ha
