package inject

import "testing"

// TestRed16IstioEmptyRevision: an empty istio.io/rev (a label templated from an unset value)
// names no revision: every Istio webhook selects a revision by name (istio.io/rev In [<rev>],
// "default" for the default revision; revision names are never empty), and the others require
// the label absent, so Istio injects nothing, on the Namespace or on the pod. retrycap injects
// the pod. On main it was skipped as PortConflict ("namespace shop is labelled istio.io/rev=",
// `label istio.io/rev is ""`) and ran with no proxy at all.
func TestRed16IstioEmptyRevision(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ns, labels map[string]string
	}{
		{name: "namespace istio.io/rev empty", ns: map[string]string{"istio.io/rev": ""}},
		{name: "namespace istio.io/rev empty, pod label inject true", ns: map[string]string{"istio.io/rev": ""}, labels: map[string]string{"sidecar.istio.io/inject": "true"}},
		{name: "pod label istio.io/rev empty", labels: map[string]string{"istio.io/rev": ""}},
		{name: "pod label istio.io/rev empty, inject true", labels: map[string]string{"istio.io/rev": "", "sidecar.istio.io/inject": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideIn(tc.ns, nil, tc.labels, nil)
			if !d.Injected {
				t.Fatalf("skipped: %q; want injected (Istio injects nothing)", d.Skip.String())
			}
		})
	}
	// An empty istio.io/rev on the Namespace does not hide istio-injection=enabled, whose
	// webhook reads that label alone.
	const tail = ": Istio's injector will add its sidecar istio-proxy, whose Envoy listens on 15001 and whose agent on 15020: the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	d := decideIn(map[string]string{"istio.io/rev": "", "istio-injection": "enabled"}, nil, nil, nil)
	if want := "PortConflict: namespace shop is labelled istio-injection=enabled" + tail; d.Injected || d.Skip.String() != want {
		t.Fatalf("injected %t, skip %q\nwant %q", d.Injected, d.Skip.String(), want)
	}
}

// TestRed16ProxyIDsOddValues: values OpenShift's own parser (library-go ParseBlock, fmt.Sscanf)
// would read past are refused whole, naming the value (the documented stricter rule), and a
// malformed supplemental-groups annotation refuses the pod even with a good UID range; both
// present with disagreeing ranges: the uid from one, the gid from the other, as Istio.
func TestRed16ProxyIDsOddValues(t *testing.T) {
	const uidRange, groups = "openshift.io/sa.scc.uid-range", "openshift.io/sa.scc.supplemental-groups"
	for _, tc := range []struct {
		name     string
		nsAnn    map[string]string
		uid, gid int64
		err      string
	}{
		{name: "leading space", nsAnn: map[string]string{uidRange: " 1000680000/10000"},
			err: `Namespace shop: annotation openshift.io/sa.scc.uid-range " 1000680000/10000" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the start " 1000680000" is not a number from 0 to 4294967295`},
		{name: "trailing newline", nsAnn: map[string]string{uidRange: "1000680000/10000\n"},
			err: `Namespace shop: annotation openshift.io/sa.scc.uid-range "1000680000/10000\n" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the size "10000\n" is not a number from 0 to 4294967295`},
		{name: "huge", nsAnn: map[string]string{uidRange: "99999999999999999999/1"},
			err: `Namespace shop: annotation openshift.io/sa.scc.uid-range "99999999999999999999/1" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the start "99999999999999999999" is not a number from 0 to 4294967295`},
		{name: "two slashes", nsAnn: map[string]string{uidRange: "1000680000/10000/5"},
			err: `Namespace shop: annotation openshift.io/sa.scc.uid-range "1000680000/10000/5" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): the size "10000/5" is not a number from 0 to 4294967295`},
		{name: "groups malformed, uid range fine", nsAnn: map[string]string{uidRange: "1000680000/10000", groups: "1000680000/"},
			err: `Namespace shop: annotation openshift.io/sa.scc.supplemental-groups "1000680000/" is not a list of group ranges ("<start>/<size>" or "<start>-<end>", comma-separated): the size "" is not a number from 0 to 4294967295`},
		{name: "groups' first block empty", nsAnn: map[string]string{uidRange: "1000680000/10000", groups: ",5000/10"},
			err: `Namespace shop: annotation openshift.io/sa.scc.supplemental-groups ",5000/10" is not a list of group ranges ("<start>/<size>" or "<start>-<end>", comma-separated): no "/" or "-"`},
		{name: "disagreeing ranges", nsAnn: map[string]string{uidRange: "1000680000/10000", groups: "2000-2999"}, uid: 1000689999, gid: 2999},
		{name: "one id", nsAnn: map[string]string{uidRange: "1/1"}, uid: 1, gid: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid, gid, err := ProxyIDs("shop", tc.nsAnn)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v\nwant %s", err, tc.err)
				}
				return
			}
			if err != nil || uid != tc.uid || gid != tc.gid {
				t.Fatalf("uid %d gid %d err %v; want %d %d", uid, gid, err, tc.uid, tc.gid)
			}
		})
	}
}
