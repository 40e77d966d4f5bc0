// Package status computes the status of a RetryPolicy from the graph the shared builder made:
// small pure setters (no clock, no client, no logging), one per part of the status, so the
// reconciler stays short (fetch, compute, set, patch once) and every rule about what the user
// sees is covered by table tests. The layout follows Cluster API's cluster_controller_status.go.
package status
