package telemetry

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// RenderJSON writes the result as one JSON object.
func RenderJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// RenderYAML writes the result as YAML (the JSON's fields).
func RenderYAML(w io.Writer, r *Result) error {
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	out, err := yaml.JSONToYAML(js)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// RenderPatch writes one merge patch per workload that needs an annotation and has none
// (kubectl patch KIND NAME -n NS --type merge --patch-file, or a kustomize patch), each headed
// by a comment saying what showed each upstream. A workload that already declares upstreams
// gets no patch (its annotation is kept) but a comment listing the differences. Entries are
// bare names: one try each; discover never writes attempts.
func RenderPatch(w io.Writer, r *Result) error {
	var b strings.Builder
	n := 0
	for _, wr := range r.Workloads {
		if wr.Existing {
			if len(wr.Differences) == 0 {
				fmt.Fprintf(&b, "# %s %s/%s keeps %s %q: what was discovered agrees\n", cm(wr.Kind), cm(wr.Namespace), cm(wr.Name), annotations.Upstreams, wr.Annotation)
				continue
			}
			fmt.Fprintf(&b, "# %s %s/%s keeps %s %q; it differs from what was discovered:\n", cm(wr.Kind), cm(wr.Namespace), cm(wr.Name), annotations.Upstreams, wr.Annotation)
			for _, d := range wr.Differences {
				if d.Declared == "" {
					fmt.Fprintf(&b, "#   %s: observed (%s), not declared\n", cm(d.Upstream), cm(d.Observed))
				} else {
					fmt.Fprintf(&b, "#   %s: declared (%s), not observed\n", cm(d.Upstream), cm(d.Declared))
				}
			}
			continue
		}
		if len(wr.Upstreams) == 0 {
			continue
		}
		if n > 0 || b.Len() > 0 {
			b.WriteString("---\n")
		}
		n++
		inferred := ""
		if wr.KindInferred {
			inferred = " (kind inferred: the data names no kind)"
		}
		fmt.Fprintf(&b, "# %s %s/%s%s: %s %q, one try each (add =N where the app retries)\n", cm(wr.Kind), cm(wr.Namespace), cm(wr.Name), inferred, annotations.Upstreams, wr.Annotation)
		if wr.Kind == workload.KindJob {
			// The API server refuses a change to a Job's spec.template (immutable once created).
			b.WriteString("#   (a Job's pod template cannot change once it is created: patch its manifest, or recreate the Job)\n")
		}
		for _, p := range wr.Discovered {
			note := ""
			if p.ObservedTries > 0 {
				note = fmt.Sprintf(", %s tries per call observed", FormatRate(p.ObservedTries))
			}
			if p.NotObserved {
				note += ", not observed over the window"
			}
			if p.ServiceNotInInput {
				note += ", Service not in the input"
			}
			fmt.Fprintf(&b, "#   %s: %s%s\n", cm(p.Upstream), cm(describe(p)), note)
		}
		obj, err := patchObject(wr)
		if err != nil {
			return err
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		b.Write(out)
	}
	if n == 0 && len(r.Workloads) == 0 {
		// Not "every workload found already declares": none was found (the command exits 2).
		b.WriteString("# nothing to patch: no workload with a call was found\n")
	} else if n == 0 {
		b.WriteString("# nothing to patch: every workload found already declares its upstreams\n")
	}
	if len(r.NonHTTP) > 0 {
		// Said here too, not only in the YAML report: an edge the patch leaves out on purpose
		// is not one it lost (its callee then shows as an entrypoint nothing calls).
		fmt.Fprintf(&b, "# %d edge(s) left out of the patches:\n", len(r.NonHTTP))
		for _, e := range r.NonHTTP {
			fmt.Fprintf(&b, "#   %s -> %s (%s): %s\n", cm(e.From), cm(e.To), cm(e.Source), cm(e.Why))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cm is a value as a comment line of the patch writes it: as it is when it is printable UTF-8,
// else Go-quoted. Names come from Prometheus label values (a service.name any pod can set, a
// ServiceEntry's host): raw, a newline in one would end the comment and write its remainder as
// YAML of the patch that kubectl applies.
func cm(s string) string {
	if printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// patchObject is the merge patch that sets wr's annotation where its kind keeps the pod
// template (workload.Kinds: a CronJob's at spec.jobTemplate.spec.template, a Pod's on itself),
// with the kind's API version.
func patchObject(wr WorkloadResult) (map[string]any, error) {
	k, ok := workload.KindOf(wr.Kind)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: retrycap writes no patch for a %s (it reads %s)", wr.Kind, wr.Namespace, wr.Name, wr.Kind, kindNames())
	}
	meta := map[string]any{"name": wr.Name, "namespace": wr.Namespace}
	obj := map[string]any{"apiVersion": k.APIVersion(), "kind": k.Kind, "metadata": meta}
	ann := map[string]string{annotations.Upstreams: wr.Annotation}
	if len(k.TemplatePath) == 0 {
		meta["annotations"] = ann
		return obj, nil
	}
	// The template's metadata, nested from the root: spec: {template: {metadata: ...}}.
	var inner any = map[string]any{"metadata": map[string]any{"annotations": ann}}
	for i := len(k.TemplatePath) - 1; i >= 0; i-- {
		inner = map[string]any{k.TemplatePath[i]: inner}
	}
	obj[k.TemplatePath[0]] = inner.(map[string]any)[k.TemplatePath[0]]
	return obj, nil
}

// kindNames lists workload.Kinds' kinds: "Deployment, StatefulSet, ..., Pod".
func kindNames() string {
	names := make([]string, 0, len(workload.Kinds))
	for _, k := range workload.Kinds {
		names = append(names, k.Kind)
	}
	return strings.Join(names, ", ")
}
