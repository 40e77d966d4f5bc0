// Package kubeobj reads workloads out of Kubernetes objects: the one adapter from an object of
// workload.Kinds (a Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob or Pod: whole,
// as the cache holds it, metadata-only, or an informer's tombstone) to a workload.Workload, the
// informers that carry workloads, and the lister that reads a
// namespace's workloads from the manager's cache (or from a direct client, in the CLI).
//
// The controller, the workload gate and the pod injector all read workloads through it, so they
// agree on what a workload is and on how Pods are read (as metadata only: a bare Pod's graph input
// is all in its metadata, and caching whole Pods would cost memory in proportion to the cluster).
// It also feeds the shared workload index (FeedIndex: the one feeder of internal/index). The pure
// packages (internal/workload, internal/index, internal/gate) stay free of any client.
package kubeobj
