// Package agree holds envtests that read one input three ways, by analyze from the manifests, by
// the controller into a policy's status (real CRDs, the mesh watcher, the manager's trimmed
// cache) and by the admission gate, and require the same numbers and fixes: the "status
// disagrees with the gate" class of #28. A package of its own because each test binary may run
// one operator (controller names are unique per process). It has no code besides its tests.
package agree
