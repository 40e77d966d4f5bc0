package analyze

import (
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/retrycap/retrycap/internal/jsonfield"
	"github.com/retrycap/retrycap/internal/workload"
)

// ErrorEntry is one input error in the document `analyze -o json` writes when the input has
// errors (RenderJSONErrors): where it was read, and, when the error names them, the object, the
// field and the value.
type ErrorEntry struct {
	File     string `json:"file"`
	Document int    `json:"document,omitempty"` // 1-based among the file's non-empty documents
	Item     int    `json:"item,omitempty"`     // 1-based in a List
	Line     int    `json:"line,omitempty"`     // the document's first line
	// Object is "Kind namespace/name" (a ClusterRetryPolicy's "ClusterRetryPolicy name").
	Object string `json:"object,omitempty"`
	// Field is the field's path from the object's root, with list indices and map keys.
	Field string `json:"field,omitempty"`
	// Value is the value at Field as written, as JSON text ("\"three\"", "2147483648"); cut to
	// 60 bytes and "..." when longer; absent for a field that should not be there.
	Value string `json:"value,omitempty"`
	// Message is the whole error, as on stderr.
	Message string `json:"message"`
}

// errorsDocument is RenderJSONErrors' document: the report's own fields, with no policy
// checked and withinCap false, so that a script reading `.withinCap` is never told true.
type errorsDocument struct {
	Errors    []ErrorEntry   `json:"errors"`
	Policies  []PolicyReport `json:"policies"`
	WithinCap bool           `json:"withinCap"`
}

// RenderJSONErrors writes the input errors that stopped a check as the JSON document of `-o
// json`: a script reading stdout gets why nothing was checked rather than an empty stream.
func RenderJSONErrors(w io.Writer, errs []error) error {
	doc := errorsDocument{Errors: []ErrorEntry{}, Policies: []PolicyReport{}}
	for _, err := range errs {
		doc.Errors = append(doc.Errors, ErrorEntries(err)...)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// ErrorEntries is err as entries: one, or one per field a strict decode refused.
func ErrorEntries(err error) []ErrorEntry {
	base := ErrorEntry{Message: err.Error()}
	text := err.Error()
	if ie, ok := errors.AsType[*InputError](err); ok {
		base.File, base.Document, base.Item, base.Line = ie.Source.File, ie.Source.Document, ie.Source.Item, ie.Source.Line
		text = ie.Err.Error()
	}
	if ae, ok := errors.AsType[*workload.AnnotationError](err); ok {
		base.Object = ae.Workload.String()
		base.Field = annotationField(ae)
		base.Value = jsonfield.Quote(ae.Value)
		return []ErrorEntry{base}
	}
	if se, ok := errors.AsType[*jsonfield.StrictError](err); ok {
		base.Object = objectBefore(text, se.Error())
		var out []ErrorEntry
		for _, f := range se.Fields {
			e := base
			e.Field = f.Path
			out = append(out, e)
		}
		if len(out) > 0 {
			return out
		}
		return []ErrorEntry{base}
	}
	if fe, ok := errors.AsType[*jsonfield.Error](err); ok {
		base.Object = objectBefore(text, fe.Error())
		base.Field, base.Value = fe.Path, fe.Value
		return []ErrorEntry{base}
	}
	if m := identPrefix.FindStringSubmatch(text); m != nil {
		base.Object = m[1]
	}
	return []ErrorEntry{base}
}

// identPrefix is the "Kind namespace/name: " (or "ClusterRetryPolicy name: ") the readers put
// before an error about one object that has no field error in it (a wrong apiVersion, a
// missing name, a policy's bounds).
var identPrefix = regexp.MustCompile(`^([A-Z][A-Za-z0-9]* [^\s:/]*/?[^\s:/]+): `)

// objectBefore is the object an error's text names before the field error's own text: the
// readers write "Kind ns/name: <field error>" (the typed kinds) or "Kind ns/name <field error>"
// (the mesh readers). "" when the field error is not at the end of text.
func objectBefore(text, fieldText string) string {
	head, ok := strings.CutSuffix(text, fieldText)
	if !ok {
		return ""
	}
	return strings.TrimRight(head, ": ")
}

// annotationField is the path of the annotation an AnnotationError is about: on a bare Pod its
// own metadata, on a workload its pod template's (where retrycap reads it; one on the
// workload's own metadata is merged there, with a warning).
func annotationField(ae *workload.AnnotationError) string {
	key := jsonfield.Quote(ae.Annotation)
	if ae.Workload.Kind == workload.KindPod {
		return "metadata.annotations[" + key + "]"
	}
	return "spec.template.metadata.annotations[" + key + "]"
}
