package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
)

// yamlToJSON is sigs.k8s.io/yaml's YAMLToJSON (strict: YAMLToJSONStrict) with the same parser,
// the same errors and the same JSON, written straight from the parsed value: the library
// converts the parsed value into a second, JSON-able tree and marshals that by reflection, half
// of its allocations (an 8.6 MB VirtualService: 190 of 450 MB). Keys are made strings as the
// library makes them (1 -> "1", true -> "true", 1.5 -> "1.5") and sorted as encoding/json sorts
// them; scalars are encoded by encoding/json.
func yamlToJSON(raw []byte, strict bool) ([]byte, error) {
	var v any
	unmarshal := yamlv2.Unmarshal
	if strict {
		unmarshal = yamlv2.UnmarshalStrict
	}
	if err := unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := writeJSON(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type keyed struct {
	key string
	val any
}

// writeJSON writes a value decoded by the YAML parser (map[any]any, int, int64, uint64, float64)
// or by encoding/json with UseNumber (map[string]any, json.Number) as JSON, keys sorted: one
// writer for both, so that a document written as JSON and the same document written as YAML give
// the same bytes (TestJSONDocumentAsYAMLPath). Lists, strings, booleans and null are the same to
// both decoders; the maps differ only in how a key becomes a string, the numbers in how they
// arrive.
func writeJSON(b *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case map[any]any:
		kv := make([]keyed, 0, len(t))
		for k, val := range t {
			ks, err := jsonKey(k, val)
			if err != nil {
				return err
			}
			kv = append(kv, keyed{ks, val})
		}
		slices.SortFunc(kv, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
		return writeObject(b, kv, func(e keyed) (string, any) { return e.key, e.val })
	case map[string]any:
		// Its keys alone, sorted, each value looked up: a keyed slice here allocated 38.9x a
		// JSON document's size in all against 37.6x (TestReadHugeJSONDocumentBounded).
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return writeObject(b, keys, func(k string) (string, any) { return k, t[k] })
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(t, 10))
	case json.Number:
		// As the YAML parser reads the same text: an integer as int64 or uint64, any other number
		// (1.0, 1e3) as a float64, which json.Marshal writes 1 and 1000.
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			b.WriteString(strconv.FormatInt(n, 10))
			return nil
		}
		if n, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			b.WriteString(strconv.FormatUint(n, 10))
			return nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("number %s", t)
		}
		return writeScalar(b, f)
	default:
		return writeScalar(b, v) // a string, a float64
	}
	return nil
}

// writeObject writes the members of an object, sorted by key as encoding/json sorts a map's
// keys, as JSON; member gives a member's key and value.
func writeObject[T any](b *bytes.Buffer, sorted []T, member func(T) (string, any)) error {
	b.WriteByte('{')
	prev := ""
	for i, e := range sorted {
		key, val := member(e)
		if i > 0 && key == prev {
			// Two YAML keys the same string (1 and "1"): the library's map kept one of them, as
			// its map iteration fell; here the later in sort order. (A JSON object's keys are
			// unique.)
			continue
		}
		prev = key
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeScalar(b, key); err != nil {
			return err
		}
		b.WriteByte(':')
		if err := writeJSON(b, val); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writeScalar encodes v as json.Marshal does (a string with its HTML characters escaped).
func writeScalar(b *bytes.Buffer, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err // the library's error, as it is
	}
	b.Write(js)
	return nil
}

// jsonKey is a mapping key as sigs.k8s.io/yaml's convertToJSONableObject makes it a string.
func jsonKey(k, v any) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case float64:
		switch s := strconv.FormatFloat(t, 'g', -1, 32); {
		case math.IsInf(t, 1):
			return ".inf", nil
		case math.IsInf(t, -1):
			return "-.inf", nil
		case math.IsNaN(t):
			return ".nan", nil
		default:
			return s, nil
		}
	case bool:
		return strconv.FormatBool(t), nil
	}
	return "", fmt.Errorf("unsupported map key of type: %s, key: %+#v, value: %+#v", reflect.TypeOf(k), k, v)
}

// jsonDocument converts a document written as one JSON value (an object or a list, with nothing
// after it) as yamlToJSON(raw, true) converts it, with encoding/json rather than the YAML
// parser: its keys sorted, its numbers written as the YAML path writes them (1.0 -> 1). ok is
// false when raw is not that, holds a key twice in one object (the YAML path says where), or a
// number it cannot write so (1e400): the caller then takes the YAML path.
func jsonDocument(raw []byte) (js []byte, ok bool) {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' && t[0] != '[' || !json.Valid(t) || jsonDuplicateKey(t) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	var b bytes.Buffer
	b.Grow(len(t))
	if writeJSON(&b, v) != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// jsonDuplicateKey reports whether a valid JSON value (json.Valid) holds a key twice in one
// object. It walks the bytes itself, the keys slices of t (json.Decoder's Token allocated 24
// times the input, a map per object 13 times): an object's keys are compared one by one, and
// through a map once it has more than smallObject of them (a ConfigMap of 10,000 keys).
func jsonDuplicateKey(t []byte) bool {
	const smallObject = 32
	type frame struct {
		obj   bool
		start int                 // its first key in keys
		big   map[string]struct{} // its keys, once it has more than smallObject
	}
	var stack []frame
	var keys [][]byte  // the open objects' keys, innermost last
	expectKey := false // the next string is a key
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '{':
			stack = append(stack, frame{obj: true, start: len(keys)})
			expectKey = true
		case '[':
			stack = append(stack, frame{start: len(keys)})
		case '}', ']':
			keys = keys[:stack[len(stack)-1].start]
			stack = stack[:len(stack)-1]
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1].obj
		case '"':
			j := i + 1
			escaped := false
			for ; t[j] != '"'; j++ {
				if t[j] == '\\' {
					escaped = true
					j++
				}
			}
			if expectKey {
				key := t[i+1 : j]
				if escaped {
					var k string
					if json.Unmarshal(t[i:j+1], &k) != nil {
						return true // cannot be (valid JSON): the YAML path says
					}
					key = []byte(k)
				}
				f := &stack[len(stack)-1]
				own := keys[f.start:]
				switch {
				case f.big != nil:
					if _, dup := f.big[string(key)]; dup {
						return true
					}
					f.big[string(key)] = struct{}{}
				case len(own) >= smallObject:
					f.big = make(map[string]struct{}, 2*len(own))
					for _, k := range own {
						f.big[string(k)] = struct{}{}
					}
					if _, dup := f.big[string(key)]; dup {
						return true
					}
					f.big[string(key)] = struct{}{}
				default:
					for _, k := range own {
						if bytes.Equal(k, key) {
							return true
						}
					}
				}
				keys = append(keys, key)
				expectKey = false
			}
			i = j
		}
	}
	return false
}
