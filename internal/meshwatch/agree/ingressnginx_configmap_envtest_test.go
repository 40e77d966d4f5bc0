package agree_test

// ingress-nginx's ConfigMap (mesh/ingressnginx_config.go): the manager reads the controller's
// DaemonSet, resolves its --configmap=$(POD_NAMESPACE)/... and reads that ConfigMap alone
// (meshwatch/ingressnginx.go); analyze, the status and the gate must agree on its 5 tries:
// client -x5-> frontend -x1-> api = 5 > cap 4, the fix the Ingress's annotation, saying the
// ConfigMap sets the default. Before, the status counted 1 try (a class of another controller
// than k8s.io/ingress-nginx was not modelled): 1 <= cap 4.
// Its own class (nginx-internal, controller example.com/ingress-nginx-internal), so that its
// controller serves none of the other cases' Ingresses; renamed: namespace shop is another's.
func init() {
	fileCases = append(fileCases,
		fileCase{name: "an ingress-nginx Ingress, tries from its controller's ConfigMap", file: "../../cli/testdata/inputs/ingress-nginx-configmap-class.yaml",
			rename: [2]string{"shop", "shop-nginx-cm"}},
	)
}
