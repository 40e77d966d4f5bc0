package operator

import (
	"testing"
	"time"
)

func TestValidatePrometheus(t *testing.T) {
	for _, tc := range []struct {
		p    Prometheus
		want string
	}{
		{Prometheus{}, ""},
		{Prometheus{URL: "http://prometheus.monitoring:9090", Interval: time.Minute}, ""},
		{Prometheus{URL: "prometheus.monitoring:9090"}, `--prometheus-url "prometheus.monitoring:9090": want an http or https URL with a host`},
		{Prometheus{URL: "http://p:9090", CallerLabel: "app.kubernetes.io/name"}, `--prometheus-caller-label "app.kubernetes.io/name": not a Prometheus label name`},
		{Prometheus{URL: "http://p:9090", Interval: -time.Second}, "--prometheus-interval -1s: must be positive"},
	} {
		err := Options{Prometheus: tc.p}.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Validate(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}
