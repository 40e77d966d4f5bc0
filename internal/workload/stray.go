package workload

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/retrycap/retrycap/internal/annotations"
)

// ReadAnnotations are the annotations retrycap reads from a pod template (or a bare Pod).
// The proxy's resource annotations are the injector's (before they were here, the gate and
// analyze warned that a retrycap.dev/proxy-cpu-limit was ignored while the injector applied it).
var ReadAnnotations = append([]string{annotations.Service, annotations.Upstreams, annotations.Inject}, annotations.ProxyResources...)

// readKeysText names ReadAnnotations in messages, the four proxy keys as one: a stray-key
// warning repeats it, and the API server keeps only about 4 KiB of a response's warnings.
var readKeysText = strings.Join(ReadAnnotations[:3], ", ") + ", retrycap.dev/proxy-{cpu,memory}-{request,limit}"

// keyPrefix is the prefix of every retrycap annotation.
const keyPrefix = "retrycap.dev/"

// writtenAnnotations are the retrycap.dev/ annotations retrycap itself writes on pods and
// templates: never stray.
var writtenAnnotations = []string{annotations.RewrittenFrom, annotations.InjectedStatus,
	"retrycap.dev/injection-skipped", "retrycap.dev/injection-warnings"}

// StrayKeys finds the retrycap.dev/ annotations of w that retrycap does not read. Annotation
// keys are case-sensitive: "retrycap.dev/Upstreams" is not retrycap.dev/upstreams, so its value
// would never be counted while the app makes those attempts. Such a key, one that differs from
// a read key only in case, or one holding a character that is not ASCII (a look-alike or an
// invisible one, which the API server refuses in a key), is a malformed annotation (miscased: denied when a policy selects w,
// as any malformed retrycap annotation is); any other unknown retrycap.dev/ key (a typo such as
// retrycap.dev/upstream) gets a warning saying it is ignored. Both name the workload, the key and
// the value. The admission gate and analyze both judge by it.
func StrayKeys(w Workload) (miscased, unknown []string) {
	for k, v := range w.Annotations.All() {
		if !strings.HasPrefix(k, keyPrefix) || slices.Contains(ReadAnnotations, k) || slices.Contains(writtenAnnotations, k) {
			continue
		}
		if i := strings.IndexFunc(k, func(r rune) bool { return r >= utf8.RuneSelf }); i >= 0 {
			// "retrycap.dev/up\u200bstreams", "retrycap.dev/upstreаms" (Cyrillic а): printed as
			// is, it reads as a key retrycap reads; quoted, with the character named, it does not.
			r, _ := utf8.DecodeRuneInString(k[i:])
			miscased = append(miscased, fmt.Sprintf("%s: annotation %+q=%q: the key holds %q (U+%04X), which is not ASCII (a look-alike or an invisible character): the API server refuses such a key, and retrycap reads only %s",
				w, k, Clip(v), r, r, readKeysText))
			continue
		}
		if i := slices.IndexFunc(ReadAnnotations, func(r string) bool { return strings.EqualFold(r, k) }); i >= 0 {
			miscased = append(miscased, fmt.Sprintf("%s: annotation %s=%q: annotation keys are case-sensitive and retrycap reads only %s, so this value would not be counted; rename the key",
				w, k, Clip(v), ReadAnnotations[i]))
			continue
		}
		unknown = append(unknown, fmt.Sprintf("%s: annotation %s=%q is not one retrycap reads (%s); it is ignored",
			w, k, Clip(v), readKeysText))
	}
	return miscased, unknown
}

// InjectError is w's retrycap.dev/inject when it is neither "true" nor "false" (the gate denies
// it, the injector skips the pod for it, analyze reports it); nil when it is one, or absent.
func InjectError(w Workload) *AnnotationError {
	v, ok := w.Annotations.Lookup(annotations.Inject)
	if !ok || v == "true" || v == "false" {
		return nil
	}
	return &AnnotationError{Workload: w, Annotation: annotations.Inject, Value: v,
		Err: fmt.Errorf("value %q is not \"true\" or \"false\"", Clip(v))}
}

// Clip shortens a value quoted in a message (to 200 bytes and its length): an annotation may
// hold up to 256 KiB, and the API server cuts an admission warning past 4 KiB.
func Clip(v string) string {
	const maxQuoted = 200
	if len(v) <= maxQuoted {
		return v
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(v[n]) {
		n-- // never cut a character in two
	}
	return v[:n] + "... (" + strconv.Itoa(len(v)) + " bytes)"
}
