// Package labyaml writes the manifests the cluster suites apply (test/e2e against envtest,
// test/node on the real node): Namespaces, RetryPolicies, Deployments of the lab app and their
// Services, in the YAML the suites apply with kubectl. The suites chain the same few shapes
// (the design's admission chain, the storm lab's chain, an injected two-tier chain); writing
// each shape once keeps them from drifting apart (a label or probe changed in one copy only).
// Test code only: under test/internal, nothing outside test/ can import it.
package labyaml
