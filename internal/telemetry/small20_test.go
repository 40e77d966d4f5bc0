package telemetry

import "testing"

// A host variable's port in NAME_PORT_<SUFFIX> (OTEL_COLLECTOR_PORT_GRPC-style) is read when the
// suffixed siblings hold one port between them; two different ports leave it unknown, and
// NAME_PORT wins over them. A port variable named otherwise (JAEGER_UI_PORT beside JAEGER_HOST)
// is not the host's.
func TestSmall20SiblingPortSuffix(t *testing.T) {
	env := func(kv ...string) []EnvVar {
		var out []EnvVar
		for i := 0; i < len(kv); i += 2 {
			out = append(out, EnvVar{Container: "app", Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	cases := []struct {
		name string
		env  []EnvVar
		port int32
		from string
	}{
		{"exact", env("CART_HOST", "cart", "CART_PORT", "7070", "CART_PORT_GRPC", "9090"), 7070, "CART_PORT"},
		{"one suffixed", env("CART_HOST", "cart", "CART_PORT_GRPC", "7070"), 7070, "CART_PORT_GRPC"},
		{"two suffixed, one port", env("CART_HOST", "cart", "CART_PORT_GRPC", "7070", "CART_PORT_MAIN", "7070"), 7070, "CART_PORT_GRPC"},
		{"two suffixed, two ports", env("CART_HOST", "cart", "CART_PORT_GRPC", "4317", "CART_PORT_HTTP", "4318"), 0, ""},
		{"not a port", env("CART_HOST", "cart", "CART_PORT_GRPC", "grpc"), 0, ""},
		{"another word before PORT", env("JAEGER_HOST", "jaeger", "JAEGER_UI_PORT", "16686"), 0, ""},
		{"PORT alone as suffix", env("CART_HOST", "cart", "CART_PORT_", "7070"), 0, ""},
	}
	for _, c := range cases {
		port, from := siblingPort(c.env, c.env[0])
		if port != c.port || from != c.from {
			t.Errorf("%s: siblingPort = %d, %q; want %d, %q", c.name, port, from, c.port, c.from)
		}
	}
}
