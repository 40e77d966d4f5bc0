package workload

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/retrycap/retrycap/internal/annotations"
)

// The checks of a workload's retrycap annotations that the admission gate and analyze share, so
// that they say the same thing about the same object: where an annotation sits (ReadView,
// JobTemplateWarnings), and what is wrong with its value (AnnotationErrors, UpstreamsWarnings,
// with StrayKeys and InjectError).

// ReadView is w (whose annotations are its pod template's) with the retrycap.dev/ annotations of
// its own metadata (own: where `kubectl annotate deploy` puts them) that the template does not
// carry: analyze reads them so (its placement warning says where they belong), and the gate
// checks the same view for malformed values, so that what analyze calls an error the gate
// refuses, wherever on the object it sits. retrycap.dev/rewritten-from is the gate's own record
// and is left out. w itself is not changed (its Pairs are shared).
func ReadView(w Workload, own map[string]string) Workload {
	for _, k := range slices.Sorted(maps.Keys(own)) {
		if !strings.HasPrefix(k, keyPrefix) || k == annotations.RewrittenFrom || w.Annotations.Has(k) {
			continue
		}
		w.Annotations = w.Annotations.With(k, own[k])
	}
	return w
}

// JobTemplateWarnings warns of each retrycap.dev/ annotation on a CronJob's
// spec.jobTemplate.metadata (jobTemplate): the Jobs get it, their pods (which the injector and
// the proxy see) do not, and retrycap reads neither; the message says where it belongs. Sorted
// by key, the value clipped.
func JobTemplateWarnings(w Workload, jobTemplate map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(jobTemplate)) {
		if strings.HasPrefix(k, keyPrefix) {
			out = append(out, fmt.Sprintf("%s: annotation %s=%q is on spec.jobTemplate.metadata, the Jobs' own, which retrycap does not read (their pods do not get it): put it on spec.jobTemplate.spec.template.metadata.annotations",
				w, k, Clip(jobTemplate[k])))
		}
	}
	return out
}

// EmptyServiceError is w's retrycap.dev/service when it is there and empty (a chart's template
// that rendered no value), nil otherwise. Read as absent, it named the service by the label or
// the workload's name in silence, and the callers' edges to the intended name missed it: the
// gate denies it, the controller and analyze report it, the injector skips the pod for it.
func EmptyServiceError(w Workload) *AnnotationError {
	if v, ok := w.Annotations.Lookup(annotations.Service); !ok || v != "" {
		return nil
	}
	return &AnnotationError{Workload: w, Annotation: annotations.Service, Value: "",
		Err: fmt.Errorf("service name is empty (a template that rendered no value?): write the name, or remove the annotation to name the service by label %s, else the workload's name", annotations.NameLabel)}
}

// AnnotationErrors are w's malformed retrycap annotations, in the order analyze reports them: an
// invalid retrycap.dev/service, a retrycap.dev/inject other than true/false, a retrycap.dev/upstreams
// that does not parse, a proxy resource annotation the injector would refuse
// (ParseProxyResources: the pod would start without the proxy), then each miscased key (StrayKeys). The gate denies a selected workload for
// the first; analyze reports them all as input errors.
func AnnotationErrors(w Workload) []error {
	var errs []error
	if err := EmptyServiceError(w); err != nil {
		errs = append(errs, err)
	} else if s := w.Annotations.Get(annotations.Service); s != "" {
		if reason := annotations.ValidateLabel(s); reason != "" {
			errs = append(errs, &AnnotationError{Workload: w, Annotation: annotations.Service, Value: s,
				Err: fmt.Errorf("service name %q is not a DNS-1123 label: %s", Clip(s), reason)})
		}
	}
	if err := InjectError(w); err != nil {
		errs = append(errs, err)
	}
	if v := w.Annotations.Get(annotations.Upstreams); v != "" {
		if _, err := annotations.ParseUpstreams(v); err != nil {
			var pe *annotations.ParseError
			if errors.As(err, &pe) {
				// A token may be the whole value (256 KiB): the message quotes it clipped.
				clipped := *pe
				clipped.Token = Clip(pe.Token)
				err = &clipped
			}
			errs = append(errs, &AnnotationError{Workload: w, Annotation: annotations.Upstreams, Value: v, Err: err})
		}
	}
	if err := proxyResourceError(w); err != nil {
		errs = append(errs, err)
	}
	miscased, _ := StrayKeys(w)
	for _, msg := range miscased {
		errs = append(errs, errors.New(msg))
	}
	return errs
}

// UpstreamsWarnings are the warnings of w's retrycap.dev/upstreams value that parses (a
// host:port upstream whose port is dropped, one service under two spellings, a bare name among
// them read in w's namespace), each naming the workload, the annotation, the token and its
// column.
func UpstreamsWarnings(w Workload) []string {
	_, warnings, _ := annotations.ParseUpstreamsWarnIn(w.Annotations.Get(annotations.Upstreams), w.Namespace)
	out := make([]string, 0, len(warnings))
	for _, wn := range warnings {
		out = append(out, fmt.Sprintf("%s: annotation %s: %s", w, annotations.Upstreams, wn))
	}
	return out
}

// proxyResourceError is the first of w's proxy resource annotations that ParseProxyResources
// refuses, named with w; nil when none is set or all are right.
func proxyResourceError(w Workload) error {
	var ann map[string]string
	for _, k := range annotations.ProxyResources {
		if v, ok := w.Annotations.Lookup(k); ok {
			if ann == nil {
				ann = map[string]string{}
			}
			ann[k] = v
		}
	}
	if ann == nil {
		return nil
	}
	if _, err := ParseProxyResources(ann); err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	return nil
}
