package promquery

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxAnswerSizeFlag is the flag that sets Options.MaxAnswerBytes, in the manager and in discover.
const MaxAnswerSizeFlag = "--prometheus-max-answer-size"

// ParseSize reads a number of bytes written as a Kubernetes quantity, as a container's memory
// limit is: 67108864, 64Mi, 128Mi, 1Gi, 500M. It must be a whole number of bytes above 0 (a
// bound of 0 would refuse every answer, a negative one means nothing) and fit an int64.
func ParseSize(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q: not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)", s)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("%q: want a size above 0 bytes (64Mi by default)", s)
	}
	// Exactly, in a big.Rat: the quantity's own int64 conversions round up or give up silently.
	r, ok := new(big.Rat).SetString(q.AsDec().String())
	switch {
	case !ok:
		return 0, fmt.Errorf("%q: not a size: want bytes as a Kubernetes quantity (67108864, 64Mi, 128Mi, 1Gi)", s)
	case !r.IsInt():
		return 0, fmt.Errorf("%q: not a whole number of bytes", s)
	case !r.Num().IsInt64() || r.Num().Int64() == math.MaxInt64:
		// ParseQuantity clamps a larger value to MaxInt64 ("9Ei"): that is not what was written.
		return 0, fmt.Errorf("%q: over the largest size, %d bytes", s, int64(math.MaxInt64-1))
	}
	return r.Num().Int64(), nil
}

// FormatSize writes n bytes as the flag takes them: in Ki, Mi, Gi... when it is a whole number
// of them ("64Mi"), else in bytes ("1000", which the quantity's own String writes "1k").
func FormatSize(n int64) string {
	if n <= 0 || n%1024 != 0 {
		return strconv.FormatInt(n, 10)
	}
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// Size is a flag.Value (and a pflag.Value) of a size in bytes, read by ParseSize.
type Size int64

// String is the size as FormatSize writes it.
func (s *Size) String() string { return FormatSize(int64(*s)) }

// Set reads a size; flag and pflag name the flag and the value before the error.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return errors.New(stripQuoted(err.Error(), v))
	}
	*s = Size(n)
	return nil
}

// Type names the value's kind in pflag's --help.
func (s *Size) Type() string { return "quantity" }

// stripQuoted drops the value ParseSize quotes at the start of its message: flag and pflag say
// it already ("invalid value "0" for flag ...").
func stripQuoted(msg, v string) string {
	q := strconv.Quote(v)
	if len(msg) > len(q) && msg[:len(q)] == q {
		msg = msg[len(q):]
		if len(msg) > 2 && msg[:2] == ": " {
			return msg[2:]
		}
		if len(msg) > 1 && msg[0] == ' ' {
			return msg[1:]
		}
	}
	return msg
}
