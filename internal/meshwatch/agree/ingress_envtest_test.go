package agree_test

// ingress-nginx (mesh/ingressnginx.go) on analyze's hand-written inputs: an Ingress's backend is
// a north-south entrypoint whose client attempts ingress-nginx's tries multiply. analyze, the
// status and the gate must agree; the status needs the manager to read the Ingresses and the
// IngressClasses (meshwatch: ingresses.networking.k8s.io, IngressClasses beside it). Before, the
// status counted no Ingress: 2 where analyze says 6, 1 where it says 5.
//
//   - class nginx, no IngressClass in the cluster (assumed ingress-nginx), its default 3 tries:
//     client -x3-> frontend -x2-> api = 6 > cap 4; a traefik Ingress beside it is not modelled.
//   - an IngressClass public of controller k8s.io/ingress-nginx, proxy-next-upstream-tries "5":
//     5 > cap 2, the fix the Ingress's annotation.
//
// Renamed: namespace shop is the new layers' case's.
func init() {
	fileCases = append(fileCases,
		fileCase{name: "an ingress-nginx Ingress, default tries", file: "../../cli/testdata/inputs/ingress-nginx.yaml",
			rename: [2]string{"shop", "shop-nginx"}},
		fileCase{name: "an ingress-nginx Ingress of an IngressClass, tries annotated", file: "../../cli/testdata/inputs/ingress-nginx-tries.yaml",
			rename: [2]string{"shop", "shop-nginx-tries"}},
	)
}
