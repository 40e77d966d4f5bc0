// Package controlplane starts the embedded control plane that `make demo`, the controller and
// webhook tests and the e2e tests run against: a real kube-apiserver and etcd (built from source
// by hack/kube-bins.sh and cached outside the repository) driven by controller-runtime's envtest,
// with the retrycap CRDs and, optionally, the webhook configurations installed. It also writes a
// kubeconfig and runs the built kubectl against it, so a test can play the user.
package controlplane
