package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/status"
)

var (
	amplificationGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "retrycap_policy_amplification",
		Help: "Worst-case retry multiplication along any chain of a RetryPolicy's workloads (+Inf for a retry cycle, NaN when the selector is invalid); namespace empty: a ClusterRetryPolicy's.",
	}, []string{"namespace", "policy"})
	withinCapGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "retrycap_policy_within_cap",
		Help: "1 when a RetryPolicy's condition WithinCap is True, else 0; namespace empty: a ClusterRetryPolicy's.",
	}, []string{"namespace", "policy"})
)

// The gauges go on controller-runtime's registry, which the manager serves on /metrics.
func init() {
	metrics.Registry.MustRegister(amplificationGauge, withinCapGauge)
}

func recordMetrics(key types.NamespacedName, st *v1alpha1.RetryPolicyStatus) {
	amplificationGauge.WithLabelValues(key.Namespace, key.Name).Set(status.AmplificationGauge(st))
	withinCapGauge.WithLabelValues(key.Namespace, key.Name).Set(status.WithinCapGauge(st))
}

// forgetMetrics deletes a deleted policy's series, so /metrics never reports a policy that is
// gone.
func forgetMetrics(key types.NamespacedName) {
	amplificationGauge.DeleteLabelValues(key.Namespace, key.Name)
	withinCapGauge.DeleteLabelValues(key.Namespace, key.Name)
}
