package policy

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// httpDateFormats are the HTTP-date forms a recipient accepts (RFC 9110
// 5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms), the
// ones net/http's ParseTime tries; written here so this package needs no
// HTTP engine.
var httpDateFormats = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	time.RFC850,
	time.ANSIC,
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 10.2.3): delay-seconds
// or an HTTP-date, as a wait from now (a date already past is no wait).
// ok is false for a value that is neither (or negative, or empty): the
// answer then carries no Retry-After the policy reads. Both engines
// (HTTP/1.1's forward.Exchange, the h2 relay) read it here.
func ParseRetryAfter(v string, now time.Time) (wait time.Duration, ok bool) {
	if v == "" {
		return 0, false
	}
	// delay-seconds, saturated: a value past the largest duration (or past int64, which Atoi
	// refuses) is a wait longer than any deadline, never a wrapped short one ("18446744074"
	// seconds wrapped to 290ms: a retry at once where the upstream asked for none).
	// delay-seconds is 1*DIGIT: no sign ("+5" is neither form, as "-1" is), which Atoi alone
	// would read.
	t := strings.Trim(v, " \t")
	if t != "" && strings.Trim(t, "0123456789") == "" {
		s, err := strconv.Atoi(t)
		if err != nil || s > int(math.MaxInt64/time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(s) * time.Second, true
	}
	for _, layout := range httpDateFormats {
		if t, err := time.Parse(layout, t); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	return 0, false
}
