package telemetry

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// checked is the answer to metric's query as internal/promquery hands it over: checked once.
func checked(t *testing.T, metric string, ss ...*model.Sample) Answer {
	t.Helper()
	c, err := CheckVector(model.Vector(ss))
	if err != nil {
		t.Fatal(err)
	}
	return CheckedAnswer(answer(metric).Query, c)
}

// TestCheckVector: the one check of an answer's series names the first bad series (its place,
// labels and values) and how many more there are; a twin is taken once and listed, not refused.
func TestCheckVector(t *testing.T) {
	order := func(v float64) *model.Sample {
		return sample(v, "namespace", "shop", "service", "order", "upstream", "payment")
	}
	const orderLabels = `{namespace="shop", service="order", upstream="payment"}`
	for _, tc := range []struct {
		name string
		v    model.Vector
		want string
		bad  BadSeries
	}{
		{"twice with two values", model.Vector{order(10), sample(1, "upstream", "x"), order(12)},
			"series " + orderLabels + " given twice, with values 10 and 12: one series has one increase over the window, and which is right cannot be told",
			BadSeries{Index: 2, Sample: order(12), Twice: true, Prev: 10}},
		{"NaN first, then an empty series and a negative one", model.Vector{order(math.NaN()), nil, sample(-1, "upstream", "x")},
			"series " + orderLabels + ": value NaN is not a counter's increase (want a number from 0 to 2^53)",
			BadSeries{Index: 0, Sample: order(math.NaN()), More: 2}},
		{"empty", model.Vector{order(1), nil}, "series 2 of the answer is empty (no labels, no value)", BadSeries{Index: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CheckVector(tc.v)
			var bad *BadSeries
			if !errors.As(err, &bad) || err.Error() != tc.want || c.Vector() != nil {
				t.Fatalf("got %v, %v\nwant %s", c.Vector(), err, tc.want)
			}
			if bad.Index != tc.bad.Index || bad.Twice != tc.bad.Twice || bad.Prev != tc.bad.Prev || bad.More != tc.bad.More ||
				(bad.Sample == nil) != (tc.bad.Sample == nil) || (bad.Sample != nil && !bad.Sample.Metric.Equal(tc.bad.Sample.Metric)) {
				t.Fatalf("got %+v, want %+v", *bad, tc.bad)
			}
		})
	}

	c, err := CheckVector(model.Vector{order(3), sample(1, "upstream", "x"), order(3), order(3)})
	if err != nil || len(c.Vector()) != 2 || c.Vector()[0].Value != 3 || c.Vector()[1].Value != 1 || len(c.Twins()) != 2 {
		t.Fatalf("twins: %v %v, %v", c.Vector(), c.Twins(), err)
	}
}

// TestReadCheckedAnswers: an answer checked where it was decoded (CheckedAnswer) reads as the
// same answer unchecked, its twins warned of; one whose Vector was replaced after the check,
// and two answers to one query (a series in both), are checked again, and a duplicate is
// refused naming the source, the series and both values.
func TestReadCheckedAnswers(t *testing.T) {
	order := func(v float64) *model.Sample {
		return sample(v, "namespace", "shop", "service", "order", "upstream", "payment")
	}
	stock := sample(4, "namespace", "shop", "service", "order", "upstream", "stock")
	const orderLabels = `{namespace="shop", service="order", upstream="payment"}`
	o := Options{Window: time.Minute}

	want := strings.Join(summary(mustRead(t, []Answer{answer("retrycap_proxy_requests_total", order(10), stock, order(10)), answer("retrycap_proxy_attempts_total", order(30))}, o)), "\n")
	got := strings.Join(summary(mustRead(t, []Answer{checked(t, "retrycap_proxy_requests_total", order(10), stock, order(10)), checked(t, "retrycap_proxy_attempts_total", order(30))}, o)), "\n")
	if got != want || !strings.Contains(got, "warning retrycap retrycap_proxy_requests_total: a series given twice with the same value: taken once: 1 series (e.g. "+orderLabels+")") {
		t.Fatalf("checked answers read\n%s\nunchecked\n%s", got, want)
	}

	replaced := checked(t, "retrycap_proxy_requests_total", order(10))
	replaced.Vector = model.Vector{order(10), order(12)}
	split := checked(t, "retrycap_proxy_requests_total", stock)
	split.Vector[0] = order(13) // the same series, changed in place: the second answer finds it
	for _, tc := range []struct {
		name    string
		answers []Answer
		want    string
	}{
		{"the Vector replaced after the check", []Answer{replaced},
			"retrycap retrycap_proxy_requests_total: series " + orderLabels + " given twice, with values 10 and 12: one series has one increase over the window, and which is right cannot be told"},
		{"two checked answers to one query", []Answer{checked(t, "retrycap_proxy_requests_total", order(10)), checked(t, "retrycap_proxy_requests_total", order(11))},
			"retrycap retrycap_proxy_requests_total: series " + orderLabels + " given twice, with values 10 and 11: one series has one increase over the window, and which is right cannot be told"},
		{"a checked and an unchecked answer to one query", []Answer{split, answer("retrycap_proxy_requests_total", order(12))},
			"retrycap retrycap_proxy_requests_total: series " + orderLabels + " given twice, with values 13 and 12: one series has one increase over the window, and which is right cannot be told"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ob, err := Read(tc.answers, o)
			if err == nil || err.Error() != tc.want || ob != nil {
				t.Fatalf("got %v, %v\nwant %s", ob, err, tc.want)
			}
		})
	}
}
