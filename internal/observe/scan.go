package observe

import (
	"errors"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The hand-written scanners below read the hot formats without reflection and without an
// allocation per line: values are sub-slices of the line, or of the per-line scratch buffer when
// a JSON string had to be unescaped.

var errJSON = errors.New("not a complete JSON object")

// valKind says what a JSON member's value is.
type valKind uint8

const (
	valString  valKind = iota // val is the unescaped text
	valLiteral                // val is a number, true, false or null as written
	valNested                 // an object or array: val is nil (skipped, validated for balance)
)

// jsonField is called for each member of a JSON object.
type jsonField func(key, val []byte, kind valKind)

// scanJSONObject walks one JSON object that must span the whole line (nothing but blanks
// after its closing brace): a truncated line is an error, never a shorter object. Nested
// objects and arrays are validated for balance and skipped.
func scanJSONObject(line []byte, scratch *[]byte, f jsonField) error {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return errJSON
	}
	i = skipWS(line, i+1)
	if i < len(line) && line[i] == '}' {
		return trailing(line, i+1)
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return errJSON
		}
		key, next, err := scanString(line, i, scratch)
		if err != nil {
			return err
		}
		i = skipWS(line, next)
		if i >= len(line) || line[i] != ':' {
			return errJSON
		}
		i = skipWS(line, i+1)
		if i >= len(line) {
			return errJSON
		}
		switch line[i] {
		case '"':
			val, next, err := scanString(line, i, scratch)
			if err != nil {
				return err
			}
			f(key, val, valString)
			i = next
		case '{', '[':
			next, err := skipNested(line, i)
			if err != nil {
				return err
			}
			f(key, nil, valNested)
			i = next
		default:
			j := i
			for j < len(line) && !endsLiteral(line[j]) {
				j++
			}
			if j == i || !validLiteral(line[i:j]) {
				return errJSON
			}
			f(key, line[i:j], valLiteral)
			i = j
		}
		i = skipWS(line, i)
		if i >= len(line) {
			return errJSON
		}
		switch line[i] {
		case ',':
			i = skipWS(line, i+1)
		case '}':
			return trailing(line, i+1)
		default:
			return errJSON
		}
	}
}

// validLiteral reports whether b is true, false, null or a number by JSON's grammar
// (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?): encoding/json refuses "01", "1-2" or "-",
// and so does observe, rather than read a value no JSON writer wrote.
func validLiteral(b []byte) bool {
	switch string(b) {
	case "null", "true", "false":
		return true
	}
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		return i > j
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(b)
}

// endsLiteral reports whether c ends a number or literal: a separator, a closing bracket or
// JSON's white space.
func endsLiteral(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

func trailing(line []byte, i int) error {
	if skipWS(line, i) != len(line) {
		return errJSON
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// scanString reads the string starting at b[i] (a quote); it returns the text (a sub-slice of b
// when it has no escape, else unescaped into scratch) and the index after the closing quote.
func scanString(b []byte, i int, scratch *[]byte) ([]byte, int, error) {
	j := i + 1
	for j < len(b) {
		switch b[j] {
		case '"':
			return b[i+1 : j], j + 1, nil
		case '\\':
			return unescape(b, i+1, scratch)
		}
		j++
	}
	return nil, 0, errJSON
}

func unescape(b []byte, start int, scratch *[]byte) ([]byte, int, error) {
	s := *scratch
	from := len(s)
	for j := start; j < len(b); j++ {
		c := b[j]
		switch c {
		case '"':
			*scratch = s
			return s[from:], j + 1, nil
		case '\\':
			if j+1 >= len(b) {
				return nil, 0, errJSON
			}
			j++
			switch b[j] {
			case '"', '\\', '/':
				s = append(s, b[j])
			case 'b':
				s = append(s, '\b')
			case 'f':
				s = append(s, '\f')
			case 'n':
				s = append(s, '\n')
			case 'r':
				s = append(s, '\r')
			case 't':
				s = append(s, '\t')
			case 'u':
				r, n := hex4(b, j+1)
				if n < 0 {
					return nil, 0, errJSON
				}
				j += 4
				if utf16.IsSurrogate(r) {
					if r2, n2 := hex4(b, j+3); n2 >= 0 && j+2 < len(b) && b[j+1] == '\\' && b[j+2] == 'u' {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							r = d
							j += 6
						}
					}
				}
				s = utf8.AppendRune(s, r)
			default:
				return nil, 0, errJSON
			}
		default:
			s = append(s, c)
		}
	}
	return nil, 0, errJSON
}

func hex4(b []byte, i int) (rune, int) {
	if i+4 > len(b) {
		return 0, -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, -1
		}
	}
	return r, 4
}

// skipNested skips the object or array starting at b[i], validated as JSON (members, commas,
// strings and literals as at the top level) without reading it: encoding/json refuses a line
// whose nested value is not JSON ("[,]", "{1}"), and so does observe. The nesting is kept on an
// explicit stack, not the call stack, whatever the depth of a line.
func skipNested(b []byte, i int) (int, error) {
	var stack []byte
	j := i
	var err error
	for {
		// j is at a value.
		j = skipWS(b, j)
		if j >= len(b) {
			return 0, errJSON
		}
		switch c := b[j]; c {
		case '{', '[':
			stack = append(stack, closer(c))
			j = skipWS(b, j+1)
			if j < len(b) && b[j] == closer(c) {
				stack = stack[:len(stack)-1]
				j++
				break // an empty one: a value read
			}
			if c == '{' {
				if j, err = objectKey(b, j); err != nil {
					return 0, err
				}
			}
			continue
		case '"':
			if j, err = skipString(b, j); err != nil {
				return 0, err
			}
		default:
			k := j
			for k < len(b) && !endsLiteral(b[k]) {
				k++
			}
			if !validLiteral(b[j:k]) {
				return 0, errJSON
			}
			j = k
		}
		// After a value: a comma and the next value (or member), or closing brackets.
		for {
			if len(stack) == 0 {
				return j, nil
			}
			j = skipWS(b, j)
			if j >= len(b) {
				return 0, errJSON
			}
			top := stack[len(stack)-1]
			if b[j] == ',' {
				j++
				if top == '}' {
					if j, err = objectKey(b, skipWS(b, j)); err != nil {
						return 0, err
					}
				}
				break
			}
			if b[j] != top {
				return 0, errJSON
			}
			stack = stack[:len(stack)-1]
			j++
		}
	}
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// objectKey skips a member's key and its colon at b[j]; it returns where the value starts.
func objectKey(b []byte, j int) (int, error) {
	if j >= len(b) || b[j] != '"' {
		return 0, errJSON
	}
	j, err := skipString(b, j)
	if err != nil {
		return 0, err
	}
	j = skipWS(b, j)
	if j >= len(b) || b[j] != ':' {
		return 0, errJSON
	}
	return j + 1, nil
}

// skipString skips the string at b[j] (a quote), its escapes checked as unescape checks them.
func skipString(b []byte, j int) (int, error) {
	for k := j + 1; k < len(b); k++ {
		switch b[k] {
		case '"':
			return k + 1, nil
		case '\\':
			k++
			if k >= len(b) {
				return 0, errJSON
			}
			switch b[k] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, n := hex4(b, k+1); n < 0 {
					return 0, errJSON
				}
				k += 4
			default:
				return 0, errJSON
			}
		}
	}
	return 0, errJSON
}

// atoi parses a non-negative decimal integer; ok false for anything else.
func atoi(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseTime reads an RFC 3339 time ("2026-11-24T14:02:11.118Z", with up to nine fraction
// digits and a Z or ±hh:mm offset) as Unix nanoseconds without going through time.Parse, which
// it falls back to for anything unusual. Only the years 1970 to 2200: a year 0 or 9999 is no
// log's, and Unix nanoseconds (or a span between two times) overflow outside 1678-2262.
func parseTime(b []byte) (int64, bool) {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't') || b[13] != ':' || b[16] != ':' {
		return slowTime(b)
	}
	num := func(s []byte) (int, bool) {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	y, ok1 := num(b[0:4])
	mo, ok2 := num(b[5:7])
	d, ok3 := num(b[8:10])
	h, ok4 := num(b[11:13])
	mi, ok5 := num(b[14:16])
	s, ok6 := num(b[17:19])
	// Anything out of the ranges time.Parse's own fast path takes (a 31 February, a leap
	// second, an offset of 24 hours) is left to it: the two must agree on every input.
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > daysIn(mo, y) || h > 23 || mi > 59 || s > 59 {
		return slowTime(b)
	}
	i := 19
	var frac int64
	if i < len(b) && b[i] == '.' {
		i++
		digits := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if digits < 9 {
				frac = frac*10 + int64(b[i]-'0')
				digits++
			}
			i++
		}
		if digits == 0 {
			return slowTime(b)
		}
		for ; digits < 9; digits++ {
			frac *= 10
		}
	}
	var off int64
	switch {
	case i == len(b)-1 && (b[i] == 'Z' || b[i] == 'z'):
	case i == len(b)-6 && (b[i] == '+' || b[i] == '-') && b[i+3] == ':':
		oh, ok1 := num(b[i+1 : i+3])
		om, ok2 := num(b[i+4 : i+6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return slowTime(b)
		}
		off = int64(oh*3600 + om*60)
		if b[i] == '-' {
			off = -off
		}
	default:
		return slowTime(b)
	}
	secs := daysFromCivil(y, mo, d)*86400 + int64(h*3600+mi*60+s) - off
	return secs*1e9 + frac, true
}

// slowTime is time.Parse's RFC 3339, with RFC 3339's lower-case "t" and "z" (section 5.6,
// which time.Parse refuses) read as the fast path reads them.
func slowTime(b []byte) (int64, bool) {
	s := string(b)
	if len(s) > 10 && s[10] == 't' {
		s = s[:10] + "T" + s[11:]
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 1970 || t.Year() > 2200 {
		return 0, false
	}
	return t.UnixNano(), true
}

// daysIn is the number of days of month m of year y (proleptic Gregorian).
func daysIn(m, y int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard
// Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
