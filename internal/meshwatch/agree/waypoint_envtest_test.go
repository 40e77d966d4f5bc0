package agree_test

// Istio ambient waypoints (mesh/waypoint.go), on istio/istio's bookinfo samples
// (internal/cli/testdata/public: taken from the istio.io/istio module at test time, its README):
// analyze, the status and the gate must agree.
//
//   - a waypoint Gateway in the cluster (class istio-waypoint) used by the reviews Service, its
//     GAMMA route without retry: productpage -x(2 x 3)-> reviews -x1-> ratings = 6 > cap 2, the
//     fix naming the route's field at the waypoint. The status needs the manager to read the
//     Service's label and the Gateway (meshwatch: Gateways beside Istio's API).
//   - the namespace enrolled (istio.io/use-waypoint, ingress through it), no Gateway "waypoint"
//     in the cluster: assumed, 3 x 6 x 3 = 54 > cap 10.
//
// Renamed: bookinfo is the ingress case's namespace.
func init() {
	fileCases = append(fileCases,
		fileCase{name: "an ambient waypoint on a Service (bookinfo)", file: "../../cli/testdata/public/istio-bookinfo-ambient",
			rename: [2]string{"bookinfo", "bookinfo-ambient"}},
		fileCase{name: "a namespace enrolled in an assumed waypoint, ingress through it (bookinfo)", file: "../../cli/testdata/public/istio-bookinfo-ambient-namespace",
			rename: [2]string{"bookinfo", "bookinfo-ambient-ns"}},
	)
}
