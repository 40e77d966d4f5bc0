package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// SetGraph puts the comparison of declared and observed edges (nil: none, the status is on
// declarations alone and c says why) and its GraphComplete condition c into st.
func SetGraph(st *v1alpha1.RetryPolicyStatus, gs *v1alpha1.GraphStatus, c metav1.Condition) {
	st.Graph = gs
	SetCondition(&st.Conditions, c)
}

// ClearGraph removes the comparison and its condition (a policy whose graph could not be built:
// an invalid selector).
func ClearGraph(st *v1alpha1.RetryPolicyStatus) {
	st.Graph = nil
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionGraphComplete)
}
