package analyze

import (
	"errors"
	"testing"
)

// A kustomize build that failed on a remote base or a Helm chart says which and what to do;
// the error text is kustomize's (krusty v0.21, offline), as ReadKustomization receives it.
func TestKustomizeError(t *testing.T) {
	cases := []struct{ err, want string }{
		{"accumulating resources: accumulation err='accumulating resources from 'https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v3.3.1': Get \"https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v3.3.1\": dial tcp: lookup github.com on 10.255.255.53:53: no such host': failed to run '/usr/bin/git fetch --depth=1 https://github.com/kubernetes-sigs/kustomize v3.3.1': fatal: unable to access 'https://github.com/kubernetes-sigs/kustomize/': Could not resolve host: github.com\n: exit status 128",
			"-k prod: the remote resource https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v3.3.1 could not be fetched (fatal: unable to access 'https://github.com/kubernetes-sigs/kustomize/': Could not resolve host: github.com : exit status 128): nothing of the kustomization was read; fetch it (or vendor it) and build again"},
		{"trouble configuring builtin HelmChartInflationGenerator with config: `\nname: foo\nrepo: https://example.com/charts\nversion: 1.0.0\n`: must specify --enable-helm",
			"-k prod: the kustomization inflates a Helm chart (helmCharts), which analyze does not render: kustomize build --enable-helm prod | retrycap analyze -f -"},
		{"accumulating resources: accumulation err='accumulating resources from 'missing.yaml': open missing.yaml: no such file or directory'",
			"-k prod: accumulating resources: accumulation err='accumulating resources from 'missing.yaml': open missing.yaml: no such file or directory'"},
	}
	for _, tc := range cases {
		m := NewManifests()
		errs := (Reader{}).ReadKustomization(m, "prod", func(string) ([]byte, error) { return nil, errors.New(tc.err) })
		if len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("errors %v\nwant %q", errs, tc.want)
		}
	}
}
