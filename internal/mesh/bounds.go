package mesh

import (
	"fmt"
	"math"
	"strconv"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/jsonfield"
)

// The bounds of the retry counts read, as each project's CRD schema (or proto) gives them: the
// API server refuses a value outside them, so a reader that took it would judge an object no
// cluster holds (Istio's attempts: 2147483648 read as 2^31 tries, while the cluster keeps the
// route without it). Checked against the schemas by crds/schema_test.go:
//
//   - Istio VirtualService spec.http[].retries.attempts, MeshConfig's attempts: format int32
//     (istio.io/api; the proto's int32); negative values istiod's validation refuses;
//   - Gateway API HTTPRoute spec.rules[].retry.attempts: minimum 1, no format (an int64);
//   - Envoy Gateway BackendTrafficPolicy spec.retry.numRetries: format int32, minimum 0;
//   - Kuma MeshRetry numRetries, Consul ServiceRouter numRetries: format int32;
//   - Dapr maxRetries: an integer without format (an int64); Linkerd's retry.linkerd.io/limit,
//     an annotation: parsed as an int64.
//
// Counts the schema allows up to 2^63-1 are counted as tries that saturate (tries), never
// wrapped to a negative.
const maxInt32 = math.MaxInt32

// countBounds is an allowed range of a retry count, and the schema it comes from.
type countBounds struct {
	min, max int64
	schema   string // "format int32", "minimum 1": named in the error
}

var (
	boundsInt32      = countBounds{0, maxInt32, "format int32"}
	boundsNonNeg     = countBounds{0, maxInt32, "format int32, minimum 0"}
	boundsGatewayAPI = countBounds{1, math.MaxInt64, "minimum 1"}
	boundsInt64      = countBounds{0, math.MaxInt64, "integer"}
)

// check returns an error naming the object (id), the field's path and the value when n is out
// of b; the error wraps a *jsonfield.Error with the path and the value.
func (b countBounds) check(id, path string, n int64) error {
	var msg string
	switch {
	case n < 0 && b.min == 0:
		msg = fmt.Sprintf("%d is negative", n)
	case n < b.min:
		msg = fmt.Sprintf("%d is under %d (the CRD's %s: the API server refuses it)", n, b.min, b.schema)
	case n > b.max:
		msg = fmt.Sprintf("%d is over %d (the CRD's %s: the API server refuses it)", n, b.max, b.schema)
	default:
		return nil
	}
	return fmt.Errorf("%s %w", id, &jsonfield.Error{Path: path, Value: strconv.FormatInt(n, 10), Msg: msg})
}

// tries is n retries and the first try, saturating at graph.Saturated: a count the schema allows
// up to 2^63-1 (the Gateway API's, Dapr's) must read as unbounded, not wrap to a negative.
func tries(n int64) int64 {
	if n >= graph.Saturated {
		return graph.Saturated
	}
	return n + 1
}
