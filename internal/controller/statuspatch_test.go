package controller

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestStatusPatch: the patch made from the two statuses is exactly the one controller-runtime's
// MergeFrom with the optimistic lock computes from the whole objects (compared as JSON values),
// and its bytes are as written for a field changed, one removed, an object changed within, and
// nothing changed.
func TestStatusPatch(t *testing.T) {
	yes, no := true, false
	base := v1alpha1.RetryPolicyStatus{
		ObservedGeneration: 2, Services: 20000, Edges: 19999, Amplification: 16, Bounded: &yes,
		WorstPath:     "svc-00000 -> svc-00001",
		WorstCaseLoad: &v1alpha1.ServiceLoad{Service: "svc-00001", Requests: 4},
		Conditions:    []metav1.Condition{{Type: "WithinCap", Status: metav1.ConditionTrue, Reason: "WithinCap", Message: "16 <= 16", LastTransitionTime: metav1.Unix(1, 0)}},
	}
	tests := []struct {
		name string
		next func(s *v1alpha1.RetryPolicyStatus)
		want string
	}{
		{"one more service", func(s *v1alpha1.RetryPolicyStatus) { s.Services++ },
			`{"metadata":{"resourceVersion":"41"},"status":{"services":20001}}`},
		{"worst path gone, bounded false", func(s *v1alpha1.RetryPolicyStatus) { s.WorstPath, s.Bounded = "", &no },
			`{"metadata":{"resourceVersion":"41"},"status":{"bounded":false,"worstPath":null}}`},
		{"worst-case load elsewhere", func(s *v1alpha1.RetryPolicyStatus) { s.WorstCaseLoad.Service = "svc-00002" },
			`{"metadata":{"resourceVersion":"41"},"status":{"worstCaseLoad":{"service":"svc-00002"}}}`},
		{"unbounded", func(s *v1alpha1.RetryPolicyStatus) { s.Amplification = math.MaxInt64 },
			`{"metadata":{"resourceVersion":"41"},"status":{"amplification":9223372036854775807}}`},
		{"nothing", func(*v1alpha1.RetryPolicyStatus) {},
			`{"metadata":{"resourceVersion":"41"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", ResourceVersion: "41",
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "retrycap", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}}}
			p.Spec.MaxAmplification = 16
			p.Status = *base.DeepCopy()
			next := base.DeepCopy()
			tt.next(next)
			patch, err := statusPatch(p.ResourceVersion, &p.Status, next)
			if err != nil {
				t.Fatal(err)
			}
			got, err := patch.Data(p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("patch\n %s\nwant\n %s", got, tt.want)
			}
			old := p.DeepCopy()
			p.Status = *next
			ref, err := client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{}).Data(p)
			if err != nil {
				t.Fatal(err)
			}
			a, b := decodeNumbers(t, got), decodeNumbers(t, ref)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("patch\n %s\nMergeFrom's\n %s", got, ref)
			}
		})
	}
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStatusPatchFirstWrite: a status the controller never wrote (no observedGeneration) is
// written whole, its zeros included: the diff from the empty status read into the Go type left
// out services, edges and amplification at 0, so the stored status never had them.
func TestStatusPatchFirstWrite(t *testing.T) {
	yes := true
	next := &v1alpha1.RetryPolicyStatus{ObservedGeneration: 1, Bounded: &yes}
	patch, err := statusPatch("7", &v1alpha1.RetryPolicyStatus{}, next)
	if err != nil {
		t.Fatal(err)
	}
	got, err := patch.Data(&v1alpha1.RetryPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"metadata":{"resourceVersion":"7"},"status":{"amplification":0,"bounded":true,"edges":0,"observedGeneration":1,"services":0}}`
	if string(got) != want {
		t.Fatalf("patch\n %s\nwant\n %s", got, want)
	}
}

// TestSkipWrite: an unchanged status is not written, unless the cache is behind this
// reconciler's last write and that write was another status (a change undone before the cache
// saw the write of the change).
func TestSkipWrite(t *testing.T) {
	s := func(n int32) *v1alpha1.RetryPolicyStatus { return &v1alpha1.RetryPolicyStatus{Services: n} }
	tests := []struct {
		name      string
		cur, next *v1alpha1.RetryPolicyStatus
		curRV     string
		last      *written
		skip      bool
	}{
		{"changed", s(1), s(2), "5", nil, false},
		{"unchanged, never written", s(1), s(1), "5", nil, true},
		{"unchanged, the cache has the last write", s(2), s(2), "7", &written{rv: "7", status: s(2)}, true},
		{"unchanged, the last write was the same", s(2), s(2), "5", &written{rv: "7", status: s(2)}, true},
		{"undone before the cache saw the write", s(1), s(1), "5", &written{rv: "7", status: s(2)}, false},
		{"changed, the cache behind", s(1), s(3), "5", &written{rv: "7", status: s(2)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := skipWrite(tt.cur, tt.next, tt.curRV, tt.last); got != tt.skip {
				t.Fatalf("skipWrite = %v, want %v", got, tt.skip)
			}
		})
	}
}
