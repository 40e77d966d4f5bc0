package mesh

import (
	"strings"
	"testing"
)

// FuzzIngressNginxController: any container args and env give a controller, nothing, or an error
// naming the workload; never a panic.
func FuzzIngressNginxController(f *testing.F) {
	f.Add("--configmap=$(POD_NAMESPACE)/c", "POD_NAMESPACE")
	f.Add("--configmap=$(", "X")
	f.Add("--configmap=$$(X)/c", "X")
	f.Add("--configmap", "")
	f.Add("--configmap=$()/x", "")
	f.Add("-configmap=a/b/c", "A")
	f.Fuzz(func(t *testing.T, arg, env string) {
		js := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"c","namespace":"n"},"spec":{"template":{"spec":{"containers":[{"name":"c","args":["/nginx-ingress-controller",` +
			quoteJSON(arg) + `],"env":[{"name":` + quoteJSON(env) + `,"valueFrom":{"fieldRef":{"fieldPath":"metadata.namespace"}}}]}]}}}}`
		s := NewSet(Options{})
		ok, err := s.AddIngressNginxController([]byte(js))
		if err != nil && !strings.HasPrefix(err.Error(), "Deployment n/c ") {
			t.Fatalf("error %q does not name the workload", err)
		}
		if err == nil && !ok {
			t.Fatalf("a controller not read: %s", js)
		}
	})
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
