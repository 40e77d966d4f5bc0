package promquery

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// pairScanner checks, as a success answer's bytes are read, that every sample pair at
// data.result[i].value is [time, value]: two elements. client_golang decodes a pair into a Go
// array and leaves what is missing as it was, so `"value":[1796213250]` reads as the count 0 (an
// edge not observed) and `[t, "1", "9"]` as 1: a silent wrong count where the answer holds none.
// It is a byte-level walk (strings, escapes, nesting; keys compared as JSON decodes them, so
// "\u0076alue" is "value"), fed by boundedBody.Read: no copy of the answer is kept, its cost is
// one pass over bytes that are read anyway.
//
// It also refuses a key given twice in an object on that path (the answer's, its "data", a
// series, a series' "metric"): client_golang takes the last, so the answer read would not be the
// one its first half says ("status": "error" then "status": "success" read as a success).
//
// It does not validate JSON (client_golang's decoder does, and says where); on input that is not
// JSON its verdict is only "no bad pair seen".
type pairScanner struct {
	stack     []pairFrame
	inString  bool
	escape    bool
	isKey     bool   // the string being read is an object's key
	key       []byte // that key's raw bytes, the first maxKeyBytes of them
	keyLong   bool   // the key is longer than maxKeyBytes: no key on the path
	afterRoot bool
	extra     int   // containers open past maxPairDepth: off the path, only counted
	bad       error // the first pair that is not [time, value], or key given twice
	// keyHash is the key's FNV-1a hash as read (escapes as written), keyEscaped whether it has
	// an escape: a series' label names are told apart by their hashes (no string per label).
	keyHash    uint64
	keyEscaped bool
	// labels are the hashes of the label names of the "metric" being read; labelSet holds them
	// too once there are more than maxLinearLabels (a hostile answer's thousands of labels).
	labels   []uint64
	labelSet map[uint64]struct{}
}

// pairFrame is one open object or array.
type pairFrame struct {
	kind        byte   // '{' or '['
	step        int8   // its place on the path root{data{result[ {value[ : 1..5, or a series' metric{: 6; 0 off it
	key         string // an object's current key, when the object is on the path
	seen        uint8  // an object on the path: its pathKeys read so far, a bit each
	expectKey   bool   // an object: the next string is a key
	expectValue bool   // an array: the next token starts an element
	elems       int    // an array: elements started
}

// maxKeyBytes bounds a key's kept bytes: the path's keys are short, escapes included.
const maxKeyBytes = 64

// Steps on the path to a sample pair.
const (
	stepRoot   = 1 // the answer's object
	stepData   = 2 // "data": {...}
	stepResult = 3 // "result": [...]
	stepSample = 4 // one series {...}
	stepPair   = 5 // its "value": [...]
	stepMetric = 6 // its "metric": {...}, whose keys are label names
)

// pathKeys are, per object of the path, the keys client_golang reads in it: one given twice is
// refused (pairFrame.seen's bit i is pathKeys[step][i]). Other keys are not read, twice or not.
var pathKeys = [...][]string{
	stepRoot:   {"status", "data", "warnings", "infos", "errorType", "error", "isPartial"},
	stepData:   {"resultType", "result"},
	stepSample: {"metric", "value", "values", "histogram", "histograms"},
}

// knownKey maps each of pathKeys' keys to itself: looked up by a key's bytes, it gives the key
// as a string without making one.
var knownKey = func() map[string]string {
	m := map[string]string{}
	for _, ks := range pathKeys {
		for _, k := range ks {
			m[k] = k
		}
	}
	return m
}()

// maxLinearLabels is how many label names of one series are compared one by one; past it they
// go in a set, so a series of a million labels is not a million squared comparisons.
const maxLinearLabels = 32

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// maxPairDepth bounds the frames kept: Prometheus' answer is five deep; deeper containers are
// off the path and only counted.
const maxPairDepth = 64

func (s *pairScanner) feed(p []byte) {
	for _, c := range p {
		if s.bad != nil {
			return
		}
		if s.inString {
			s.stringByte(c)
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			s.valueStart()
			s.inString, s.escape = true, false
			if top := s.top(); top != nil && top.kind == '{' && top.expectKey {
				top.expectKey = false
				s.isKey, s.key, s.keyLong = true, s.key[:0], false
				s.keyHash, s.keyEscaped = fnvOffset, false
			}
		case '{', '[':
			s.valueStart()
			s.open(c)
		case '}', ']':
			s.close()
		case ',':
			if top := s.top(); top != nil {
				if top.kind == '{' {
					top.expectKey = true
				} else {
					top.expectValue = true
				}
			}
		case ':':
		default:
			s.valueStart() // a number, true, false or null: counted at its first byte
		}
	}
}

func (s *pairScanner) top() *pairFrame {
	if len(s.stack) == 0 || s.extra > 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// valueStart counts an element of the array it starts in.
func (s *pairScanner) valueStart() {
	if top := s.top(); top != nil && top.kind == '[' && top.expectValue {
		top.expectValue = false
		top.elems++
	}
}

func (s *pairScanner) stringByte(c byte) {
	switch {
	case s.escape:
		s.escape = false
	case c == '\\':
		s.escape = true
		s.keyEscaped = true
	case c == '"':
		s.inString = false
		if s.isKey {
			s.isKey = false
			if top := s.top(); top != nil && top.step == stepMetric {
				s.label()
			} else if top != nil && top.step != 0 {
				top.key = s.keyString()
				s.once(top)
			}
		}
		return
	}
	if s.isKey {
		s.keyHash = (s.keyHash ^ uint64(c)) * fnvPrime
		if len(s.key) < maxKeyBytes {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	}
}

// keyString is the key as JSON decodes it when it is one of the path's ("" when it is not, too
// long or not a valid string).
func (s *pairScanner) keyString() string {
	if s.keyLong {
		return ""
	}
	if bytes.IndexByte(s.key, '\\') < 0 { // no escape: the bytes are the key, no allocation
		return knownKey[string(s.key)] // "" when not one of them
	}
	var k string
	if json.Unmarshal(append(append([]byte{'"'}, s.key...), '"'), &k) != nil {
		return ""
	}
	return k
}

// once refuses top's key when the object gave it before (top is on the path, its key just read).
func (s *pairScanner) once(top *pairFrame) {
	for i, k := range pathKeys[top.step] {
		if k != top.key {
			continue
		}
		if top.seen&(1<<i) == 0 {
			top.seen |= 1 << i
			return
		}
		where := "its object"
		switch top.step {
		case stepData:
			where = `its "data"`
		case stepSample:
			where = fmt.Sprintf("series %d", s.stack[len(s.stack)-2].elems)
		}
		s.bad = fmt.Errorf("the answer gives %q twice in %s (which one counts is ambiguous: client_golang takes the last)", k, where)
		return
	}
}

// label refuses a label name the series' "metric" gave before (its key just read). A name
// spelt with an escape is compared as JSON decodes it; one over maxKeyBytes with an escape, as
// written (no Prometheus writes either).
func (s *pairScanner) label() {
	h := s.keyHash
	if s.keyEscaped && !s.keyLong {
		var k string
		if json.Unmarshal(append(append([]byte{'"'}, s.key...), '"'), &k) != nil {
			return // not a JSON string: client_golang says so
		}
		h = fnvOffset
		for i := 0; i < len(k); i++ {
			h = (h ^ uint64(k[i])) * fnvPrime
		}
	}
	twice := false
	if s.labelSet != nil {
		_, twice = s.labelSet[h]
		s.labelSet[h] = struct{}{}
	} else {
		for _, x := range s.labels {
			if x == h {
				twice = true
				break
			}
		}
		s.labels = append(s.labels, h)
		if len(s.labels) > maxLinearLabels {
			s.labelSet = make(map[uint64]struct{}, 2*len(s.labels))
			for _, x := range s.labels {
				s.labelSet[x] = struct{}{}
			}
		}
	}
	if !twice {
		return
	}
	name := string(s.key)
	switch {
	case s.keyLong:
		name += "..."
	case s.keyEscaped:
		_ = json.Unmarshal(append(append([]byte{'"'}, s.key...), '"'), &name)
	}
	s.bad = fmt.Errorf(`the answer gives label %q twice in series %d's "metric" (which one counts is ambiguous: client_golang takes the last)`, name, s.stack[len(s.stack)-3].elems)
}

func (s *pairScanner) open(kind byte) {
	if len(s.stack) >= maxPairDepth {
		s.extra++
		return
	}
	var step int8
	parent := s.top()
	switch {
	case parent == nil && len(s.stack) == 0 && !s.afterRoot && kind == '{':
		step = stepRoot
	case parent == nil:
	case parent.step == stepRoot && parent.key == "data" && kind == '{':
		step = stepData
	case parent.step == stepData && parent.key == "result" && kind == '[':
		step = stepResult
	case parent.step == stepResult && kind == '{':
		step = stepSample
	case parent.step == stepSample && parent.key == "value" && kind == '[':
		step = stepPair
	case parent.step == stepSample && parent.key == "metric" && kind == '{':
		step = stepMetric
		s.labels, s.labelSet = s.labels[:0], nil
	}
	s.stack = append(s.stack, pairFrame{kind: kind, step: step, expectKey: kind == '{', expectValue: kind == '['})
}

func (s *pairScanner) close() {
	if s.extra > 0 {
		s.extra--
		return
	}
	if len(s.stack) == 0 {
		return
	}
	if top := s.top(); top != nil && top.step == stepPair && top.elems != 2 {
		series := 0
		if len(s.stack) >= 3 {
			series = s.stack[len(s.stack)-3].elems
		}
		s.bad = fmt.Errorf(`series %d of the answer: its "value" holds %d element(s), want [time, value]: a count would be read where the answer holds none`, series, top.elems)
	}
	s.stack = s.stack[:len(s.stack)-1]
	if len(s.stack) == 0 {
		s.afterRoot = true
	}
}
