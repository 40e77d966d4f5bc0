package policy

// HeaderBudget is the request header that carries the chain budget: the most
// times this request may still be multiplied below this point, itself included.
const HeaderBudget = "Retrycap-Budget"

// BaggageKey is the W3C baggage member that carries the same value, so apps
// that already propagate OpenTelemetry baggage need no change.
const BaggageKey = "retrycap-budget"

// HeaderExhausted marks a response on which a proxy gave up; a proxy above
// never retries such a response (the chain below already spent its budget).
const HeaderExhausted = "Retrycap-Exhausted"

// maxBudget bounds parsed values so arithmetic on them can never overflow.
const maxBudget = 1 << 30

// ParseBudgetHeader parses a Retrycap-Budget value: optional surrounding
// spaces/tabs around a positive decimal integer. Anything else (empty, zero,
// signs, junk, overflow) is malformed and reported as absent (ok=false),
// because a malformed value must never raise a budget.
func ParseBudgetHeader(v []byte) (n int, ok bool) {
	v = trimLeadingZeros(trimOWS(v))
	if len(v) == 0 || len(v) > 10 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > maxBudget {
		return 0, false
	}
	return n, true
}

// ParseBaggage finds the retrycap-budget members in a W3C baggage header
// value (members separated by commas, properties after ';') and parses each
// like ParseBudgetHeader. The smallest well-formed member wins (a repeated
// member can only lower the budget, never raise it, whichever comes first);
// malformed ones count as absent.
func ParseBaggage(v []byte) (n int, ok bool) {
	return smallestBaggageMember(v, BaggageKey, ParseBudgetHeader)
}

// ParseBudgetList parses a Retrycap-Budget field value that may hold
// several values joined by commas (repeated fields combined, RFC 9110
// 5.3): the smallest well-formed one wins.
func ParseBudgetList(v []byte) (n int, ok bool) {
	return smallestListItem(v, ParseBudgetHeader)
}

// smallestListItem parses each comma-separated item of a field value with
// parse and returns the smallest well-formed one (a repeated field can only
// lower a bound, never raise it). The Retrycap-Budget and Retrycap-Deadline
// fields share it.
func smallestListItem[T int | int64](v []byte, parse func([]byte) (T, bool)) (least T, ok bool) {
	for len(v) > 0 {
		item := v
		if i := indexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if m, good := parse(item); good && (!ok || m < least) {
			least, ok = m, true
		}
	}
	return least, ok
}

// smallestBaggageMember finds the members named key in a W3C baggage value
// (members separated by commas, properties after ';'), parses each value
// with parse and returns the smallest well-formed one; malformed members
// count as absent.
func smallestBaggageMember[T int | int64](v []byte, key string, parse func([]byte) (T, bool)) (least T, ok bool) {
	for len(v) > 0 {
		var member []byte
		if i := indexByte(v, ','); i >= 0 {
			member, v = v[:i], v[i+1:]
		} else {
			member, v = v, nil
		}
		if i := indexByte(member, ';'); i >= 0 {
			member = member[:i]
		}
		eq := indexByte(member, '=')
		if eq < 0 || !equalFoldASCII(trimOWS(member[:eq]), key) {
			continue
		}
		if m, good := parse(member[eq+1:]); good && (!ok || m < least) {
			least, ok = m, true
		}
	}
	return least, ok
}

// AppendBaggage appends to dst the baggage value src with the
// retrycap-budget member set to n: an existing member is replaced in place
// (keeping other members and their order), otherwise it is appended.
func AppendBaggage(dst, src []byte, n int) []byte {
	return appendBaggageMember(dst, src, BaggageKey, n)
}

// appendBaggageMember is AppendBaggage for any member key.
func appendBaggageMember(dst, src []byte, memberKey string, n int) []byte {
	replaced := false
	first := true
	for len(src) > 0 {
		var member []byte
		if i := indexByte(src, ','); i >= 0 {
			member, src = src[:i], src[i+1:]
		} else {
			member, src = src, nil
		}
		m := trimOWS(member)
		if len(m) == 0 {
			continue
		}
		key := m
		if i := indexByte(m, '='); i >= 0 {
			key = trimOWS(m[:i])
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if equalFoldASCII(key, memberKey) {
			if replaced {
				// Drop duplicates so a stale second member cannot confuse a parser below.
				dst = dst[:len(dst)-1]
				continue
			}
			replaced = true
			dst = append(dst, memberKey...)
			dst = append(dst, '=')
			dst = appendInt(dst, n)
			continue
		}
		dst = append(dst, m...)
	}
	if !replaced {
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, memberKey...)
		dst = append(dst, '=')
		dst = appendInt(dst, n)
	}
	return dst
}

// IncomingBudget resolves the budget n of a call from what the app
// propagated: the smaller of the header and baggage values when present,
// clamped to cap; absent or malformed means the call is an entry and gets cap.
func IncomingBudget(header []byte, haveHeader bool, baggage []byte, haveBaggage bool, chainCap int) int {
	n := chainCap
	if haveHeader {
		if v, ok := ParseBudgetList(header); ok && v < n {
			n = v
		}
	}
	if haveBaggage {
		if v, ok := ParseBaggage(baggage); ok && v < n {
			n = v
		}
	}
	return n
}

// Split is the default "retry nearest the user" split of a chain budget n
// over a call configured for attempts tries: the call may make Attempts
// tries; the first carries First, each retry carries 1, and
// First + (Attempts-1) <= n.
type Split struct {
	Attempts int
	First    int
}

// SplitBudget computes the split. attempts and n below 1 are treated as 1.
func SplitBudget(attempts, n int) Split {
	if attempts < 1 {
		attempts = 1
	}
	if n < 1 {
		n = 1
	}
	r := attempts - 1
	if n-1 < r {
		r = n - 1
	}
	return Split{Attempts: r + 1, First: n - r}
}

// BudgetFor returns the budget that attempt number i (1-based) carries.
func (s Split) BudgetFor(i int) int {
	if i <= 1 {
		return s.First
	}
	return 1
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// trimLeadingZeros drops the zeros before a number's first other digit
// (keeping one of "000"): "0005" is 5, as strconv reads it, not a value too
// long to read.
func trimLeadingZeros(b []byte) []byte {
	for len(b) > 1 && b[0] == '0' {
		b = b[1:]
	}
	return b
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// AppendInt appends the decimal form of a non-negative n without allocating.
func AppendInt(dst []byte, n int) []byte { return appendInt(dst, n) }

func appendInt(dst []byte, n int) []byte {
	if n < 0 {
		n = 0
	}
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}
