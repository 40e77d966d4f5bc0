package telemetry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestArgItems(t *testing.T) {
	cases := []struct {
		name string
		c    corev1.Container
		want []EnvVar
	}{
		{"booksapp traffic", corev1.Container{Name: "traffic", Args: []string{"-initial-delay=30s", "webapp:7000"}},
			[]EnvVar{{Container: "traffic", Name: "args[0]", Value: "30s", Arg: true}, {Container: "traffic", Name: "args[1]", Value: "webapp:7000", Arg: true}}},
		{"flags alone passed over", corev1.Container{Name: "app", Command: []string{"app", "-v", "--debug"}, Args: []string{"--url=http://a:80", "--"}},
			[]EnvVar{{Container: "app", Name: "command[0]", Value: "app", Arg: true}, {Container: "app", Name: "args[0]", Value: "http://a:80", Arg: true}}},
		{"none", corev1.Container{Name: "app"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			left := maxExpansion
			if got := argItems(tc.c, nil, &left, func(string) { t.Fatal("cut") }); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if got := (EnvVar{Container: "traffic", Name: "args[1]", Arg: true}).Source(); got != "args[1] (container traffic)" {
		t.Errorf("Source %q", got)
	}
	if got := (EnvVar{Container: "app", Name: "PAYMENT"}).Source(); got != "env PAYMENT (container app)" {
		t.Errorf("Source %q", got)
	}
}

// TestExpandVars: $(NAME) as the kubelet expands it (k8s.io/kubernetes third_party/forked/golang/expansion).
func TestExpandVars(t *testing.T) {
	vars := map[string]string{"H": "order", "P": "8080"}
	for in, want := range map[string]string{
		"http://$(H):$(P)/x": "http://order:8080/x",
		"$$(H)":              "$(H)",
		"$(NOPE):80":         "$(NOPE):80",
		"$(H":                "$(H",
		"a$b$":               "a$b$",
		"$$$(H)":             "$order",
		"":                   "",
	} {
		left := maxExpansion
		if got, cut := expandVars(in, vars, &left); got != want || cut {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
