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

// checkAnswers refuses answers no counter's increase gives, before any is read: Read's readers
// take a value as a count, and a NaN, an infinity or a negative one would become an edge's
// rate or tries (NaN compares false with everything: a false pass). A series given twice with
// different values is refused too (which is right cannot be told; summing would count its calls
// twice); twice with the same value it is taken once, with a warning, as Prometheus takes a
// sample appended twice. A value that is not a whole number is a count: increase() extrapolates
// to the window's edges. Errors name the source, the metric, the series with its labels and the
// value; the first is returned, with how many more there are.
func checkAnswers(answers []Answer, w *warnings) ([]Answer, error) {
	if len(answers) == 0 {
		return nil, errors.New("nothing was read: no answer to any query (want the answers to telemetry.Queries)")
	}
	known := map[string]bool{}
	for _, q := range Queries(time.Minute, "") {
		known[q.Metric] = true
	}
	seen := map[string]*seriesSet{} // per metric
	var first error
	more := 0
	fail := func(err error) {
		if first == nil {
			first = err
		} else {
			more++
		}
	}
	out := make([]Answer, 0, len(answers))
	for _, a := range answers {
		src := string(a.Query.Source) + " " + a.Query.Metric
		if !known[a.Query.Metric] {
			return nil, fmt.Errorf("%s: an answer to a query Read does not know (metric %q): not read, so refused (want one of telemetry.Queries)", src, a.Query.Metric)
		}
		set := seen[a.Query.Metric]
		if set == nil {
			set = &seriesSet{byFP: make(map[model.Fingerprint]*model.Sample, len(a.Vector))}
			seen[a.Query.Metric] = set
		}
		kept := make(model.Vector, 0, len(a.Vector))
		for i, s := range a.Vector {
			if s == nil {
				fail(fmt.Errorf("%s: series %d of the answer is empty (no labels, no value)", src, i+1))
				continue
			}
			f := float64(s.Value)
			if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > MaxIncrease {
				fail(fmt.Errorf("%s: series %s: value %s is not a counter's increase (want a number from 0 to 2^53)", src, s.Metric, formatValue(f)))
				continue
			}
			if prev, ok := set.add(s); ok {
				if prev != s.Value {
					fail(fmt.Errorf("%s: series %s given twice, with values %s and %s: one series has one increase over the window, and which is right cannot be told", src, s.Metric, formatValue(float64(prev)), formatValue(f)))
				} else {
					w.add(src+": a series given twice with the same value: taken once", s.Metric)
				}
				continue
			}
			kept = append(kept, s)
		}
		out = append(out, Answer{Query: a.Query, Vector: kept})
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
