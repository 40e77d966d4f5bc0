package workload

import (
	"cmp"
	"slices"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// CompareStrictness orders policies strictest first: the lowest spec.maxAmplification, ties by
// namespace, then name. It is the one ordering behind "the strictest selecting policy wins": the
// gate names the strictest exceeded policy first, and the injector renders the strictest
// selecting policy's settings. Ties are broken by name so that the choice never depends on the
// order a cache lists policies in.
func CompareStrictness(a, b *v1alpha1.RetryPolicy) int {
	return cmp.Or(cmp.Compare(a.Spec.MaxAmplification, b.Spec.MaxAmplification),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// SortStrictest sorts policies strictest first (CompareStrictness).
func SortStrictest(ps []*v1alpha1.RetryPolicy) {
	slices.SortStableFunc(ps, CompareStrictness)
}
