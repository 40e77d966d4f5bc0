// Package e2e holds retrycap's end-to-end tests: the operator against a real kube-apiserver and
// etcd, driven through the real kubectl, and the installable artifacts as a whole (config/default
// rendered by that kubectl, checked object by object; the Helm chart rendered by the real helm
// against it, every value, and a server-side dry run: helm_test.go). It has no non-test code.
package e2e
