package cli

import "testing"

// A Go template that parses as YAML (modelled on linkerd2's opaque_ports_client.yaml, args
// "http://{{ .SvcTarget }}:8080") was read as real objects without a
// word, by analyze and by discover. Both now read it as written (as kubectl would apply it) with
// one grouped warning naming the file, the object and the field, and the advice to render it.
func TestTemplateThatParsesWarnsGrouped(t *testing.T) {
	const file = "testdata/discover/input2_19/templated_clients.yaml.tmpl"
	const warn = "warning: " + file + `: document 1: Deployment default/loadgen-svc: a template expression in "spec.template.spec.containers[0].args[2]" ("http://{{ .SvcTarget }}:8080"): read as written; if this is a Helm chart's template, run helm template first and analyze its output (and 2 more like it; -o json lists them all)` + "\n"
	code, out, stderr := run(t, "", "analyze", "-f", file)
	const wantOut = "read: 1 file(s), 3 object(s): 3 workload(s) (0 declare retrycap.dev/upstreams), 0 Service(s), 0 RetryPolicy(ies)\n" + warn +
		"not checked: no RetryPolicy (retrycap.dev/v1alpha1) in the input: nothing to check against\n\n"
	const wantErr = "retrycap: analyze: nothing checked: no RetryPolicy (retrycap.dev/v1alpha1) in the input: nothing to check against\n"
	if code != ExitBadInput || out != wantOut || stderr != wantErr {
		t.Fatalf("analyze: exit %d, stdout\n%q\nstderr\n%q\nwant exit %d, stdout\n%q\nstderr\n%q", code, out, stderr, ExitBadInput, wantOut, wantErr)
	}
	code, _, stderr = run(t, "", "discover", "-f", file)
	if want := warn + "retrycap: discover: nothing found: no env value of 3 workload(s) names a Service\n"; code != ExitBadInput || stderr != want {
		t.Fatalf("discover: exit %d, stderr\n%q\nwant exit %d, stderr\n%q", code, stderr, ExitBadInput, want)
	}
}
