package gate

import (
	"github.com/retrycap/retrycap/internal/workload"
)

// workloads is a Source over a fixed list of stored workloads: the whole namespace, or any part
// of it, parsed per decision and never prepared.
type workloads []workload.Workload

func (ws workloads) Workloads(*workload.Policy) []*workload.Parsed {
	ps := make([]*workload.Parsed, len(ws))
	for i, w := range ws {
		ps[i] = workload.Parse(w)
	}
	return ps
}

func (workloads) Prepared(*workload.Policy) *workload.Base { return nil }

func (workloads) Services(*workload.Policy) *workload.ServiceSet { return nil }

// withServices is a Source over fixed workloads and Services.
type withServices struct {
	workloads
	svcs []workload.Service
}

func (s withServices) Services(*workload.Policy) *workload.ServiceSet {
	return workload.NewServiceSet(s.svcs)
}
