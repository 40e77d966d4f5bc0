package inject

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// OpenShift's restricted-v2 SCC gives each namespace a range of UIDs (and of supplemental
// groups) and refuses a pod whose container asks for a runAsUser outside it: the proxy's fixed
// RunAsUser (65532) is outside every range OpenShift allocates (from 1000000000). The
// namespace's annotations say the range.
const (
	// UIDRangeAnnotation is the Namespace's UID range, "<start>/<size>" (as OpenShift writes
	// it: "1000680000/10000") or "<start>-<end>".
	UIDRangeAnnotation = "openshift.io/sa.scc.uid-range"
	// SupplementalGroupsAnnotation is the Namespace's group ranges: blocks as in
	// UIDRangeAnnotation, comma-separated.
	SupplementalGroupsAnnotation = "openshift.io/sa.scc.supplemental-groups"
)

// ProxyIDs are the proxy's runAsUser and runAsGroup for a pod of Namespace ns with annotations
// nsAnn, as Istio's injector picks its sidecar's (istio/istio pkg/kube/inject/inject.go
// GetProxyIDs, its injection template's runAsUser/runAsGroup; it sets no fsGroup): the uid is
// the last of UIDRangeAnnotation's range, the gid the last of SupplementalGroupsAnnotation's
// first block, else of UIDRangeAnnotation's range; without them RunAsUser for both. Where
// Istio falls back to its default on a value it cannot read, this refuses it (an error naming
// the Namespace, the annotation and the value): the default uid would be outside the range the
// SCC enforces, and the pod refused with no word of why.
func ProxyIDs(ns string, nsAnn map[string]string) (uid, gid int64, err error) {
	uid, gid = RunAsUser, RunAsUser
	who := "Namespace " + ns // as the workload is named in the other skips: kind, then name
	uidRange, hasUID := nsAnn[UIDRangeAnnotation]
	if hasUID {
		b, err := parseIDBlock(uidRange)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: annotation %s %q is not a UID range (\"<start>/<size>\", as OpenShift writes it, or \"<start>-<end>\"): %w", who, UIDRangeAnnotation, uidRange, err)
		}
		uid, gid = b.end, b.end
	}
	if groups, ok := nsAnn[SupplementalGroupsAnnotation]; ok {
		first, _, _ := strings.Cut(groups, ",")
		b, err := parseIDBlock(first)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: annotation %s %q is not a list of group ranges (\"<start>/<size>\" or \"<start>-<end>\", comma-separated): %w", who, SupplementalGroupsAnnotation, groups, err)
		}
		gid = b.end
	}
	return uid, gid, nil
}

// idBlock is a range of ids, both ends included.
type idBlock struct{ start, end int64 }

// parseIDBlock reads "<start>/<size>" or "<start>-<end>" (openshift/library-go
// pkg/security/uid ParseBlock, which Istio copies): ids are uint32. Stricter than it: the whole
// value must be the block (Sscanf stopped at the first unread byte), the range must not be
// empty, and its last id must not be 0, root, which the proxy's runAsNonRoot refuses.
func parseIDBlock(in string) (idBlock, error) {
	num := func(what, s string) (int64, error) {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s %q is not a number from 0 to %d", what, s, uint32(math.MaxUint32))
		}
		return int64(n), nil
	}
	var b idBlock
	if a, z, ok := strings.Cut(in, "/"); ok {
		start, err := num("the start", a)
		if err != nil {
			return b, err
		}
		size, err := num("the size", z)
		if err != nil {
			return b, err
		}
		if size == 0 {
			return b, fmt.Errorf("the size is 0")
		}
		b = idBlock{start, start + size - 1}
	} else if a, z, ok := strings.Cut(in, "-"); ok {
		start, err := num("the start", a)
		if err != nil {
			return b, err
		}
		end, err := num("the end", z)
		if err != nil {
			return b, err
		}
		if end < start {
			return b, fmt.Errorf("the end %d is below the start %d", end, start)
		}
		b = idBlock{start, end}
	} else {
		return b, fmt.Errorf("no \"/\" or \"-\"")
	}
	switch {
	case b.end > math.MaxUint32:
		return b, fmt.Errorf("the range ends at %d, above %d", b.end, uint32(math.MaxUint32))
	case b.end == 0:
		return b, fmt.Errorf("the range ends at 0, root, which the proxy's runAsNonRoot refuses")
	}
	return b, nil
}
