package gate

import (
	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// workloads is a Source over a fixed list of stored workloads: the whole namespace, or any part
// of it, parsed per decision and never prepared.
type workloads []workload.Workload

func (ws workloads) Workloads() []*workload.Parsed {
	ps := make([]*workload.Parsed, len(ws))
	for i, w := range ws {
		ps[i] = workload.Parse(w)
	}
	return ps
}

func (workloads) Prepared(*v1alpha1.RetryPolicy) *workload.Base { return nil }

func (workloads) Services() *workload.ServiceSet { return nil }

// withServices is a Source over fixed workloads and Services.
type withServices struct {
	workloads
	svcs []workload.Service
}

func (s withServices) Services() *workload.ServiceSet { return workload.NewServiceSet(s.svcs) }
