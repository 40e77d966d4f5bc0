package agree_test

// A service graph with a cycle that is not a call loop (orders <-> inventory, both retrying): the
// worst chain visits each service once, web -x2-> orders -x3-> inventory -x2-> db = 12, and the
// status and the gate must say 12, not "unbounded" (the gate follows the simple-path rule since
// gatetime's merge). In a file of its own, so that a change of the cycle rule touches only it.
func init() {
	fileCases = append(fileCases, fileCase{
		name: "a cycle that is not a call loop", file: "../../cli/testdata/inputs/cycle.yaml",
		rename: [2]string{"shop", "shop-cycle"},
	})
}
