package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterRetryPolicySpec is a RetryPolicySpec over the workloads of every namespace
// namespaceSelector selects: its graph spans those namespaces, so a chain whose hops belong to
// different teams' namespaces is one chain under one cap. Inside the selected namespaces the
// pod-template selector applies as in a RetryPolicy; entrypoints name "service.namespace".
type ClusterRetryPolicySpec struct {
	// NamespaceSelector selects the namespaces whose workloads the policy covers, by the
	// Namespace objects' labels. Required: {} selects every namespace (the manager's own and the
	// ones the webhooks skip are still skipped by admission).
	// +required
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`

	RetryPolicySpec `json:",inline"`
}

// ClusterRetryPolicy caps retry multiplication along every call chain of the workloads it
// selects across namespaces: an upstream "name.ns" resolves into namespace ns when ns is
// selected (through its Services, as in-namespace names do), else stays a leaf. Nodes in its
// status are named "name.namespace".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=crp,categories=retrycap
// +kubebuilder:printcolumn:name="Cap",type=integer,JSONPath=`.spec.maxAmplification`
// +kubebuilder:printcolumn:name="Amplification",type=integer,JSONPath=`.status.amplification`
// +kubebuilder:printcolumn:name="Worst Path",type=string,JSONPath=`.status.worstPath`
// +kubebuilder:printcolumn:name="Worst Time",type=string,JSONPath=`.status.worstTimeToAnswer`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.enforcement`
// +kubebuilder:printcolumn:name="Within Cap",type=string,JSONPath=`.status.conditions[?(@.type=="WithinCap")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="WithinCap")].reason`,priority=1
// +kubebuilder:printcolumn:name="Max Time",type=string,JSONPath=`.spec.maxTimeToAnswer`,priority=1
// +kubebuilder:printcolumn:name="Within Max Time",type=string,JSONPath=`.status.conditions[?(@.type=="WithinMaxTime")].status`,priority=1
// +kubebuilder:printcolumn:name="Services",type=integer,JSONPath=`.status.services`,priority=1
// +kubebuilder:printcolumn:name="Edges",type=integer,JSONPath=`.status.edges`,priority=1
type ClusterRetryPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="!has(self.entrypoints) || self.entrypoints.all(e, e.service.contains('.'))",message="a ClusterRetryPolicy's entrypoints name a service with its namespace (\"web.shop\")",fieldPath=".entrypoints"
	Spec ClusterRetryPolicySpec `json:"spec"`
	// Status has the fields of a RetryPolicy's, nodes named "name.namespace".
	Status RetryPolicyStatus `json:"status,omitempty"`
}

// ClusterRetryPolicyList is a list of ClusterRetryPolicies.
//
// +kubebuilder:object:root=true
type ClusterRetryPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterRetryPolicy `json:"items"`
}
