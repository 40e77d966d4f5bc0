package operator

import (
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/promquery"
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
		{Prometheus{URL: "http://p:9090", Auth: promquery.Auth{Username: "retrycap"}}, `--prometheus-username "retrycap": --prometheus-password-file is required with it`},
		{Prometheus{URL: "https://p:9090", Auth: promquery.Auth{BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token", CAFile: "/nonexistent/ca.crt"}},
			`--prometheus-ca-file "/nonexistent/ca.crt": unable to read CA cert: unable to read file /nonexistent/ca.crt: open /nonexistent/ca.crt: no such file or directory`},
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
