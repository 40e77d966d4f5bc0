package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// statusPatch is the JSON merge patch (RFC 7386) from status old to next with the
// resourceVersion rv it was computed from: what client.MergeFromWithOptions(base,
// MergeFromWithOptimisticLock{}) sends when only the status differs, made from the two statuses
// alone. The generic path marshals both whole objects (metadata with its managedFields, spec,
// status) and decodes them again to diff them: at 20,000 workloads in one namespace that was a
// third of the manager's CPU per change (managerscale's profile), for a patch of a few fields.
//
// The first write (old has no observedGeneration: the controller never wrote this status) is
// the whole of next. A field without omitempty (services, edges, amplification) that is 0 is 0
// in old too, as the Go type reads an absent one, so the diff left it out and it was never
// stored: a policy that never had a graph showed an empty AMPLIFICATION column, and one that
// had lost its graph showed 0.
func statusPatch(rv string, old, next *v1alpha1.RetryPolicyStatus) (client.Patch, error) {
	o := map[string]any{}
	if old.ObservedGeneration != 0 {
		var err error
		if o, err = toJSONObject(old); err != nil {
			return nil, err
		}
	}
	n, err := toJSONObject(next)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"metadata": map[string]any{"resourceVersion": rv}}
	if d := mergeDiff(o, n); len(d) > 0 {
		body["status"] = d
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("marshalling the status patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, data), nil
}

func toJSONObject(s *v1alpha1.RetryPolicyStatus) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("marshalling a status: %w", err)
	}
	// Numbers as written: an int64 past 2^53 (an unbounded amplification is 2^63-1) would not
	// survive a float64.
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("reading a status back: %w", err)
	}
	return m, nil
}

// mergeDiff is the merge patch taking object a to b: b's keys whose values differ (objects
// diffed again, anything else, arrays too, replaced whole) and null for a's keys b lacks.
func mergeDiff(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, bv := range b {
		av, ok := a[k]
		if ok && reflect.DeepEqual(av, bv) {
			continue
		}
		am, aObj := av.(map[string]any)
		bm, bObj := bv.(map[string]any)
		if ok && aObj && bObj {
			out[k] = mergeDiff(am, bm)
			continue
		}
		out[k] = bv
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = nil
		}
	}
	return out
}
