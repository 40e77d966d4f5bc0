package mesh

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
)

// Doc is an object's JSON decoded once, for applying several rewrites (and an annotation) and
// returning the RFC 6902 patch of all of them. The patch is what jsonpatch.CreatePatch of the
// object before and after gives (a differential test says so), computed over the subtrees the
// rewrites touched only: diffing a 1.1 MB VirtualService whole decoded it twice more and walked
// every route, for a change of a few fields.
type Doc struct {
	orig []byte
	root any
	// touched are the subtrees changed so far (a route: spec.http[5]; else the path's first
	// key), each with its JSON before the first change ("" when it was absent).
	touched []touched
	// byPointer indexes touched by the subtree's pointer; above holds the pointers of every
	// proper ancestor of a touched subtree.
	byPointer map[string]int
	above     map[string]bool
	// whole: two touched subtrees nest (a rewrite of spec after one of spec.http[5]); Patch diffs
	// the whole object.
	whole bool
}

type touched struct {
	path   []any
	before any // decoded as encoding/json decodes (numbers float64), as the patch diffs it
	absent bool
	// ops are the subtree's operations as Patch last computed them; dirty: changed since.
	ops   []jsonpatch.Operation
	dirty bool
}

// NewDoc decodes obj (numbers kept as written).
func NewDoc(obj []byte) (*Doc, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	return &Doc{orig: obj, root: root, byPointer: map[string]int{}, above: map[string]bool{}}, nil
}

// Apply changes the field r names, as Rewrite.Apply does on the JSON (the same checks, the same
// errors).
func (d *Doc) Apply(r *Rewrite) error {
	d.touch(r.path)
	return r.applyTo(d.root)
}

// SetAnnotation sets metadata.annotations[key] (creating the map).
func (d *Doc) SetAnnotation(key, value string) error {
	d.touch([]any{"metadata"})
	m, ok := d.root.(map[string]any)
	if !ok {
		return fmt.Errorf("the object is not a JSON object")
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[key] = value
	return nil
}

// AnnotationBytes is the size of metadata.annotations as changed, keys and values together (how
// the API server bounds it), leaving out key.
func (d *Doc) AnnotationBytes(key string) int {
	m, _ := d.root.(map[string]any)
	md, _ := m["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	n := 0
	for k, v := range ann {
		if s, ok := v.(string); ok && k != key {
			n += len(k) + len(s)
		}
	}
	return n
}

// Bytes is the object as changed.
func (d *Doc) Bytes() ([]byte, error) { return json.Marshal(d.root) }

// Original is the value at RFC 6901 pointer ptr in the object as given (numbers as float64, as
// encoding/json decodes them), if it has one.
func (d *Doc) Original(ptr string) (any, bool) {
	toks := pointerTokens(ptr)
	for n := len(toks); n > 0; n-- {
		i, ok := d.byPointer[pointerOf(toks[:n])]
		if !ok {
			continue
		}
		t := d.touched[i]
		if t.absent {
			return nil, false
		}
		return follow(t.before, toks[n:])
	}
	var v any
	if err := json.Unmarshal(d.orig, &v); err != nil {
		return nil, false
	}
	return follow(v, toks)
}

// Patch is the RFC 6902 patch from the object as given to the object as changed: what
// jsonpatch.CreatePatch of the two gives, in no particular order.
func (d *Doc) Patch() ([]jsonpatch.Operation, error) {
	if d.whole {
		after, err := d.Bytes()
		if err != nil {
			return nil, err
		}
		return jsonpatch.CreatePatch(d.orig, after)
	}
	ops := []jsonpatch.Operation{}
	for i := range d.touched {
		t := &d.touched[i]
		if t.dirty {
			cur, ok := follow(d.root, tokens(t.path))
			var after any
			if ok {
				var err error
				if after, err = plain(cur); err != nil {
					return nil, err
				}
			}
			prefix := pointer(t.path)
			switch {
			case t.absent && ok:
				t.ops = []jsonpatch.Operation{jsonpatch.NewOperation("add", prefix, after)}
			case !t.absent && !ok:
				t.ops = []jsonpatch.Operation{jsonpatch.NewOperation("remove", prefix, nil)}
			case t.absent:
				t.ops = nil
			default:
				t.ops = diffValues(t.before, after, prefix, nil)
			}
			t.dirty = false
		}
		ops = append(ops, t.ops...)
	}
	return ops, nil
}

// diffValues appends the operations from a to b at pointer p, as jsonpatch.CreatePatch
// computes them (gomodules.xyz/jsonpatch/v2's handleValues: a changed type or scalar is replaced,
// objects are diffed by key, lists by index with the extra items removed or added).
func diffValues(a, b any, p string, ops []jsonpatch.Operation) []jsonpatch.Operation {
	if a == nil && b == nil {
		return ops
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return append(ops, jsonpatch.NewOperation("replace", p, b))
		}
		for k, x := range bv {
			kp := p + "/" + pointerEscaper.Replace(k)
			y, ok := av[k]
			if !ok {
				ops = append(ops, jsonpatch.NewOperation("add", kp, x))
				continue
			}
			ops = diffValues(y, x, kp, ops)
		}
		for k := range av {
			if _, ok := bv[k]; !ok {
				ops = append(ops, jsonpatch.NewOperation("remove", p+"/"+pointerEscaper.Replace(k), nil))
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			return append(ops, jsonpatch.NewOperation("replace", p, b))
		}
		n := min(len(av), len(bv))
		for i := len(av) - 1; i >= n; i-- {
			ops = append(ops, jsonpatch.NewOperation("remove", p+"/"+strconv.Itoa(i), nil))
		}
		for i := n; i < len(bv); i++ {
			ops = append(ops, jsonpatch.NewOperation("add", p+"/"+strconv.Itoa(i), bv[i]))
		}
		for i := range n {
			ops = diffValues(av[i], bv[i], p+"/"+strconv.Itoa(i), ops)
		}
	default:
		if reflect.TypeOf(a) != reflect.TypeOf(b) || a != b {
			ops = append(ops, jsonpatch.NewOperation("replace", p, b))
		}
	}
	return ops
}

// touch records the subtree path lies in before its first change.
func (d *Doc) touch(path []any) {
	root := path[:1]
	for i, t := range path {
		if _, isIndex := t.(int); isIndex {
			root = path[:i+1]
			break
		}
	}
	toks := tokens(root)
	key := pointerOf(toks)
	if i, ok := d.byPointer[key]; ok {
		d.touched[i].dirty = true
		return
	}
	if d.above[key] {
		d.whole = true // a subtree of it was touched first
		return
	}
	for n := 1; n < len(toks); n++ {
		if _, ok := d.byPointer[pointerOf(toks[:n])]; ok {
			d.whole = true // it lies in a subtree touched first
			return
		}
	}
	t := touched{path: append([]any(nil), root...), dirty: true}
	if v, ok := follow(d.root, toks); ok {
		// Untouched so far: as given. A copy, as encoding/json decodes it.
		t.before, _ = plain(v)
	} else {
		t.absent = true
	}
	d.byPointer[key] = len(d.touched)
	d.touched = append(d.touched, t)
	for n := 1; n < len(toks); n++ {
		d.above[pointerOf(toks[:n])] = true
	}
}

// plain is a copy of v (decoded with numbers as json.Number, or set by a rewrite as int64 or
// string) as encoding/json decodes its encoding: numbers as float64, parsed as encoding/json
// parses them, so the patch's values are those of jsonpatch.CreatePatch without encoding the
// subtree and decoding it again.
func plain(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := plain(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := plain(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.Number:
		return strconv.ParseFloat(string(x), 64)
	case int64:
		return float64(x), nil
	case nil, string, bool, float64:
		return x, nil
	}
	return nil, fmt.Errorf("unexpected %T in a decoded object", v)
}

// tokens renders a path's keys and indexes as pointer tokens.
func tokens(path []any) []string {
	out := make([]string, len(path))
	for i, t := range path {
		switch t := t.(type) {
		case int:
			out[i] = strconv.Itoa(t)
		case string:
			out[i] = t
		}
	}
	return out
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointerOf is the RFC 6901 pointer of unescaped tokens.
func pointerOf(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(t))
	}
	return b.String()
}

// pointerTokens splits an RFC 6901 pointer, unescaped.
func pointerTokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// follow walks toks (keys, or indexes of lists) from v.
func follow(v any, toks []string) (any, bool) {
	cur := v
	for _, tok := range toks {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || strconv.Itoa(i) != tok {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
