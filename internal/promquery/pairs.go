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
	bad       error // the first pair that is not [time, value]
}

// pairFrame is one open object or array.
type pairFrame struct {
	kind        byte   // '{' or '['
	step        int8   // its place on the path root{data{result[ {value[ : 1..5, 0 off it
	key         string // an object's current key, when the object is on the path
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
	case c == '"':
		s.inString = false
		if s.isKey {
			s.isKey = false
			if top := s.top(); top != nil && top.step != 0 {
				top.key = s.keyString()
			}
		}
		return
	}
	if s.isKey {
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
		for _, name := range [...]string{"data", "result", "value"} {
			if string(s.key) == name {
				return name
			}
		}
		return ""
	}
	var k string
	if json.Unmarshal(append(append([]byte{'"'}, s.key...), '"'), &k) != nil {
		return ""
	}
	return k
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
