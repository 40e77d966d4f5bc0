package analyze

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/retrycap/retrycap/internal/workload"
)

// Services are graph input: callers name Services, and a Service's selector picks the
// workloads behind the name (workload.ServiceSet). Kept apart from the workload reading in
// manifests.go.

// service reads a v1 Service into m.Services and counts it in m.Summary; its source is recorded
// as "Service/ns/name".
func (r Reader) service(m *Manifests, src Source, js []byte, tm *typeMeta) []error {
	var s corev1.Service
	if err := r.decode(src, js, tm, &s); err != nil {
		return []error{err}
	}
	if s.Namespace == "" {
		s.Namespace = r.namespace()
	}
	m.Services = laterWins(m, m.Services, "Service/"+s.Namespace+"/"+s.Name, "Service "+s.Namespace+"/"+s.Name, src,
		func(x workload.Service) bool { return x.Namespace == s.Namespace && x.Name == s.Name })
	m.Services = append(m.Services, workload.Service{
		Namespace: s.Namespace, Name: s.Name, Selector: s.Spec.Selector,
		ExternalName: s.Spec.Type == corev1.ServiceTypeExternalName,
	})
	m.Summary.Services = len(m.Services)
	return r.addMesh(m, src, js, tm)
}
