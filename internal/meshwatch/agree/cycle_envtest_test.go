package agree_test

// A service graph with a cycle that is not a call loop (orders <-> inventory, both retrying): the
// worst chain visits each service once, web -x2-> orders -x3-> inventory -x2-> db = 12, and the
// status and the gate must say 12, not "unbounded". In a file of its own: the gate's cycle rule is
// being changed on another branch (gatetime); until it lands the gate's part may disagree, and
// then skips with the reason.
func init() {
	fileCases = append(fileCases, fileCase{
		name: "a cycle that is not a call loop", file: "../../cli/testdata/inputs/cycle.yaml",
		rename:   [2]string{"shop", "shop-cycle"},
		gateSkip: "the gate still calls a multi-service retry cycle unbounded; the simple-path rule is gatetime's (#28)",
	})
}
