package telemetry

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// MaxIncrease is the largest counter increase a series may hold: 2^53, beyond which a float64
// no longer holds every integer. No request counter gets there in a window.
const MaxIncrease = 1 << 53

// BadSeries is a series no counter's increase gives, the first CheckVector found in an answer:
// an empty one (a JSON null in the result), a value that is NaN, infinite, negative or over
// MaxIncrease, or labels given before in the answer with another value. Its message names the
// series with its labels quoted (a value with quotes or newlines reads as written) and the
// values; the caller prefixes what it read (the query, the source and metric).
type BadSeries struct {
	// Index is the series' place in the answer, from 0.
	Index int
	// Sample is the series; nil when it is empty.
	Sample *model.Sample
	// Twice: the labels came before in the answer with the value Prev (another value: a twin
	// with the same value is not a BadSeries, see Checked.Twins).
	Twice bool
	Prev  model.SampleValue
	// More is how many more series of the answer CheckVector refused.
	More int
	// Why is what the series holds instead of a value, when it holds none (no "value" in the
	// answer, a native histogram); "" when it holds a value that is not a count.
	Why string
}

func (b *BadSeries) Error() string {
	switch {
	case b.Sample == nil:
		return fmt.Sprintf("series %d of the answer is empty (no labels, no value)", b.Index+1)
	case b.Twice:
		return fmt.Sprintf("series %s given twice, with values %s and %s: one series has one increase over the window, and which is right cannot be told",
			b.Sample.Metric, formatValue(float64(b.Prev)), formatValue(float64(b.Sample.Value)))
	case b.Why != "":
		return fmt.Sprintf("series %s: %s", b.Sample.Metric, b.Why)
	}
	return fmt.Sprintf("series %s: value %s is not a counter's increase (want a number from 0 to 2^53)", b.Sample.Metric, formatValue(float64(b.Sample.Value)))
}

// Checked is an answer's series as CheckVector passed them: each a count, each label set once.
type Checked struct {
	v     model.Vector
	twins []*model.Sample
}

// Vector is the answer's series, a twin taken once.
func (c Checked) Vector() model.Vector { return c.v }

// Twins are the series given twice with the same value (the second of each), taken once.
func (c Checked) Twins() []*model.Sample { return c.twins }

// CheckVector is the one check of an answer's values and duplicates, on whichever path the
// answer arrives (internal/promquery checks each answer as it decodes it, Read the answers it is
// given unchecked): a series a reader would take as a count must be one, and each label set must
// be given once (a sum by its labels has each once; summing both would count its calls twice).
// NaN compares false with everything (a false pass where it became a rate or tries). A value
// that is not a whole number is a count: increase() extrapolates to the window's edges. A
// series twice with the same value is taken once and listed in Twins (the reader decides:
// promquery refuses it, Read warns); with another value it is refused, as which is right cannot
// be told. The error is a *BadSeries, the first, with how many more.
func CheckVector(v model.Vector) (Checked, error) {
	ss := newSeriesSet(len(v))
	return ss.check(v)
}

// check checks v against the series added to ss before (Read's answers of one query share one).
func (ss *seriesSet) check(v model.Vector) (Checked, error) {
	var bad *BadSeries
	fail := func(b BadSeries) {
		if bad == nil {
			bad = &b
		} else {
			bad.More++
		}
	}
	var twins []int
	for i, s := range v {
		if s == nil {
			fail(BadSeries{Index: i})
			continue
		}
		// A native histogram decodes with a value of 0 beside it: not an increase of 0.
		if s.Histogram != nil {
			fail(BadSeries{Index: i, Sample: s, Why: "a native histogram, not a counter's increase"})
			continue
		}
		f := float64(s.Value)
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > MaxIncrease {
			fail(BadSeries{Index: i, Sample: s})
			continue
		}
		if prev, ok := ss.add(s); ok {
			if prev != s.Value {
				fail(BadSeries{Index: i, Sample: s, Twice: true, Prev: prev})
			} else {
				twins = append(twins, i)
			}
		}
	}
	if bad != nil {
		return Checked{}, bad
	}
	if len(twins) == 0 {
		return Checked{v: v}, nil // the answer as given: no copy of tens of thousands of series
	}
	c := Checked{v: make(model.Vector, 0, len(v)-len(twins))}
	for i, s := range v {
		if len(twins) > 0 && twins[0] == i {
			c.twins, twins = append(c.twins, s), twins[1:]
			continue
		}
		c.v = append(c.v, s)
	}
	return c, nil
}

// CheckedAnswer is the answer to q of series CheckVector passed: Read does not check them again
// (a poll reads tens of thousands of series; one pass is enough). Replacing its Vector makes it
// an unchecked answer again.
func CheckedAnswer(q Query, c Checked) Answer {
	return Answer{Query: q, Vector: c.v, checked: c.v, twins: c.twins}
}

// isChecked: a's Vector is still the one CheckVector passed (the same length and first series).
func (a Answer) isChecked() bool {
	if a.checked == nil || len(a.checked) != len(a.Vector) {
		return false
	}
	return len(a.Vector) == 0 || &a.checked[0] == &a.Vector[0]
}

// checkAnswers refuses answers no counter's increase gives, before any is read (Read's readers
// take a value as a count), through CheckVector: an answer of CheckedAnswer is not checked again
// unless another answer to its query comes with it (the two answers' series are then checked as
// one). An answer to a query Read does not know and no answer at all are refused too. Errors name
// the source, the metric, the series with its labels and the value; the first is returned, with
// how many more series there are; a twin is a warning.
func checkAnswers(answers []Answer, w *warnings) ([]Answer, error) {
	if len(answers) == 0 {
		return nil, errors.New("nothing was read: no answer to any query (want the answers to telemetry.Queries)")
	}
	known := map[string]bool{}
	for _, q := range Queries(time.Minute, "") {
		known[q.Metric] = true
	}
	perMetric := map[string]int{}
	for _, a := range answers {
		if !known[a.Query.Metric] {
			return nil, fmt.Errorf("%s %s: an answer to a query Read does not know (metric %q): not read, so refused (want one of telemetry.Queries)", a.Query.Source, a.Query.Metric, a.Query.Metric)
		}
		perMetric[a.Query.Metric]++
	}
	sets := map[string]*seriesSet{} // per metric
	var first error
	more := 0
	out := make([]Answer, 0, len(answers))
	for _, a := range answers {
		src := string(a.Query.Source) + " " + a.Query.Metric
		c := Checked{v: a.Vector, twins: a.twins}
		if !a.isChecked() || perMetric[a.Query.Metric] > 1 {
			set := sets[a.Query.Metric]
			if set == nil {
				set = newSeriesSet(len(a.Vector))
				sets[a.Query.Metric] = set
			}
			var err error
			if c, err = set.check(a.Vector); err != nil {
				var bad *BadSeries
				errors.As(err, &bad) // check's errors are all *BadSeries
				if first == nil {
					first = fmt.Errorf("%s: %w", src, err)
					more += bad.More
				} else {
					more += 1 + bad.More
				}
				continue
			}
		}
		for _, s := range c.twins {
			w.add(src+": a series given twice with the same value: taken once", s.Metric)
		}
		out = append(out, Answer{Query: a.Query, Vector: c.v})
	}
	if first != nil {
		if more > 0 {
			return nil, fmt.Errorf("%w (and %d more series refused)", first, more)
		}
		return nil, first
	}
	return out, nil
}

// seriesSet finds a series given twice: by its labels' fingerprint (no string per series: a
// poll reads tens of thousands), the labels compared on a match, and by its labels written out
// only for series whose fingerprints collide.
type seriesSet struct {
	byFP    map[model.Fingerprint]*model.Sample
	byLabel map[string]model.SampleValue
}

func newSeriesSet(n int) *seriesSet {
	return &seriesSet{byFP: make(map[model.Fingerprint]*model.Sample, n)}
}

// add records s; it returns the value of the series with the same labels added before, if any.
func (ss *seriesSet) add(s *model.Sample) (model.SampleValue, bool) {
	fp := s.Metric.FastFingerprint()
	prev, ok := ss.byFP[fp]
	if !ok {
		ss.byFP[fp] = s
		return 0, false
	}
	if prev.Metric.Equal(s.Metric) {
		return prev.Value, true
	}
	if ss.byLabel == nil {
		ss.byLabel = map[string]model.SampleValue{}
	}
	k := s.Metric.String()
	if v, ok := ss.byLabel[k]; ok {
		return v, true
	}
	ss.byLabel[k] = s.Value
	return 0, false
}

func formatValue(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
