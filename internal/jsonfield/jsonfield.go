package jsonfield

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	sigsjson "sigs.k8s.io/json"
)

// Error is a value of the wrong type, or a field the type does not have, at Path.
type Error struct {
	// Path is the field's path from the object's root: "spec.http[0].retries.attempts",
	// `metadata.annotations["retrycap.dev/upstreams"]`.
	Path string
	// Value is the value at Path as written (JSON text, cut to 60 bytes and "..."; empty for a
	// field that should not be there).
	Value string
	// Msg says what is wrong with the value at Path.
	Msg string
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// Decode decodes data into v (a pointer) as the API server decodes an object: field names match
// case-sensitively (encoding/json's "Annotations" would be read as "annotations", the API
// server drops or refuses it), and a field v does not have or a field given twice is an error
// (kubectl's default --validate=strict refuses both). A value of the wrong type is an *Error
// naming its path and value.
func Decode(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v)
	if err != nil {
		// The type error of sigs.k8s.io/json is in an internal package: decode again with
		// encoding/json, which reports the same first error with its offset.
		fresh := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if jerr := json.Unmarshal(data, fresh); jerr != nil {
			return Describe(data, jerr)
		}
		return err
	}
	if len(strict) == 0 {
		return nil
	}
	se := &StrictError{}
	for _, e := range strict {
		se.Fields = append(se.Fields, strictField(e.Error()))
	}
	return se
}

// StrictError is every field the API server's strict decoder refuses in one object: unknown
// (`unknown field "spec.template.annotations"`) or given twice (`duplicate field "x"`). Its
// text is the decoder's, one message per field joined by "; ".
type StrictError struct {
	// Fields are the refused fields: Path the field's path, Msg "unknown field" or
	// "duplicate field", Value empty; Text the decoder's message.
	Fields []StrictField
}

// StrictField is one field a strict decode refused.
type StrictField struct {
	Error
	// Text is the decoder's message for it.
	Text string
}

func (e *StrictError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Text
	}
	return strings.Join(msgs, "; ")
}

// strictField reads sigs.k8s.io/json's `unknown field "a.b"` and `duplicate field "a.b"` (its
// error types are internal); another message keeps an empty Path.
func strictField(text string) StrictField {
	f := StrictField{Text: text}
	for _, kind := range []string{"unknown field", "duplicate field"} {
		if q, ok := strings.CutPrefix(text, kind+" "); ok {
			if path, err := strconv.Unquote(q); err == nil {
				f.Path, f.Msg = path, kind
			}
		}
	}
	return f
}

// Unmarshal is json.Unmarshal with its type errors described (Describe): for the readers that
// decode only the fields they read into local structs, where other fields are expected.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return Describe(data, err)
	}
	return nil
}

// Describe turns a *json.UnmarshalTypeError from decoding data into an *Error with the path
// (list indices and map keys included) and the value; other errors are returned as they are.
func Describe(data []byte, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	field := jsonField(te.Field)
	path, raw, ok := locate(data, te.Offset)
	if !ok || !within(field, stripIndices(path)) {
		// A type's own UnmarshalJSON (metav1.Duration's) decodes its bytes alone: the offset
		// is in them. The field's path, without its list indices, finds the value.
		if path, raw, ok = locateField(data, field, valueKind(te.Value)); !ok {
			return err
		}
	}
	w := want(te)
	if k := jsonKind(raw); w == "a string" && (k == "a number" || k == "a boolean") {
		w += " (quote it)"
	}
	return &Error{Path: path, Value: shorten(raw), Msg: fmt.Sprintf("%s is %s, want %s", shorten(raw), jsonKind(raw), w)}
}

// span is a value's path and its bytes' extent in the input: start is where the token before it
// ended (at or before the value's first byte), end where the value ended.
type span struct {
	path       string
	start, end int64
	depth      int
}

// locate finds the innermost value whose extent holds offset (encoding/json reports the offset
// just after a mismatched scalar, or just inside a mismatched object or array).
func locate(data []byte, offset int64) (string, []byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var best *span
	var walk func(path string, depth int) error
	walk = func(path string, depth int) error {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if err := walk(join(path, k.(string)), depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		end := dec.InputOffset()
		if start < offset && offset <= end && (best == nil || depth > best.depth) {
			best = &span{path: path, start: start, end: end, depth: depth}
		}
		return nil
	}
	if err := walk("", 0); err != nil || best == nil || best.path == "" {
		return "", nil, false
	}
	raw := bytes.TrimLeft(data[best.start:best.end], " \t\r\n,:")
	return best.path, raw, true
}

// jsonField drops from a Go decoder's field path the names of embedded structs (upper case:
// "spec.RetryPolicySpec.maxAmplification"), which are not in the JSON.
func jsonField(f string) string {
	parts := strings.Split(f, ".")
	out := parts[:0]
	for _, p := range parts {
		if p != "" && (p[0] < 'A' || p[0] > 'Z') {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

// within reports whether a value at path (indices stripped) is the one Go's decoder names
// field: field's names, in order, from path's first, with map keys (which Go's path leaves out:
// "spec.policies.retries.maxRetries" for "spec.policies.retries.r1.maxRetries") between them.
func within(field, path string) bool {
	fs, ps := strings.Split(field, "."), strings.Split(path, ".")
	if len(fs) == 0 || len(ps) == 0 || fs[0] != ps[0] {
		return false
	}
	i := 0
	for _, p := range ps {
		if i < len(fs) && p == fs[i] {
			i++
		}
	}
	return i == len(fs)
}

// stripIndices drops the list indices and quoted keys' brackets of a path, as Go's decoder
// writes a field ("spec.http.retries").
func stripIndices(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] != '[' {
			b.WriteByte(path[i])
			continue
		}
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			break
		}
		if path[i+1] == '"' {
			k, _ := strconv.Unquote(path[i+1 : i+j])
			b.WriteString("." + k)
		}
		i += j
	}
	return b.String()
}

// valueKind is jsonKind's name for the Value of a *json.UnmarshalTypeError ("number 2.5").
func valueKind(v string) string {
	switch {
	case strings.HasPrefix(v, "number"):
		return "a number"
	case v == "string":
		return "a string"
	case v == "bool":
		return "a boolean"
	case v == "object":
		return "an object"
	case v == "array":
		return "a list"
	}
	return v
}

// locateField finds the first value of JSON kind kind at field (dotted, no list indices: "spec.http.retries")
// in data, going into every list on the way.
func locateField(data []byte, field, kind string) (string, []byte, bool) {
	if field == "" {
		return "", nil, false
	}
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return "", nil, false
	}
	var find func(v any, path string, keys []string) (string, any, bool)
	find = func(v any, path string, keys []string) (string, any, bool) {
		if l, ok := v.([]any); ok {
			for i, it := range l {
				if p, x, ok := find(it, path+"["+strconv.Itoa(i)+"]", keys); ok {
					return p, x, true
				}
			}
			return "", nil, false
		}
		if len(keys) == 0 {
			raw, err := json.Marshal(v)
			return path, v, err == nil && jsonKind(raw) == kind
		}
		m, ok := v.(map[string]any)
		if !ok {
			return "", nil, false
		}
		x, ok := m[keys[0]]
		if !ok {
			return "", nil, false
		}
		return find(x, join(path, keys[0]), keys[1:])
	}
	path, v, ok := find(doc, "", strings.Split(field, "."))
	if !ok || path == "" {
		return "", nil, false
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", nil, false
	}
	return path, raw, true
}

// join appends key to path: a plain name after a dot, any other key quoted in brackets, as
// kubectl's field paths write an annotation ("metadata.annotations[\"a.b/c\"]").
func join(path, key string) string {
	plain := key != "" && !strings.ContainsFunc(key, func(c rune) bool {
		return c != '_' && c != '-' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9')
	})
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// shorten renders a value for a message, cut to a readable length.
func shorten(raw []byte) string {
	const limit = 60
	if len(raw) <= limit {
		return string(raw)
	}
	return string(raw[:limit]) + "..."
}

// jsonKind names the JSON type of a value.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// want says what the Go type takes, and for an integer that does not fit, why.
func want(te *json.UnmarshalTypeError) string {
	t := te.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n, ok := strings.CutPrefix(te.Value, "number "); ok && !strings.ContainsAny(n, ".eE") {
			return fmt.Sprintf("an integer that fits in %s", t.Kind())
		}
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return t.String()
}

// Quote is s as JSON text, "<", ">" and "&" as written (json.Marshal escapes them for HTML): an
// Error's Value for a string value.
func Quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// Join appends key to path as the paths of this package write them (a plain name after a dot,
// any other key quoted in brackets): for readers that walk a document themselves.
func Join(path, key string) string { return join(path, key) }
