package workload

import (
	"slices"
	"strings"
	"testing"
)

func TestStrayKeys(t *testing.T) {
	long := strings.Repeat("x", 300)
	cases := []struct {
		name              string
		annotations       map[string]string
		miscased, unknown []string
	}{
		{name: "read and written keys are not stray", annotations: map[string]string{
			"retrycap.dev/upstreams": "order=3", "retrycap.dev/service": "web", "retrycap.dev/inject": "true",
			"retrycap.dev/rewritten-from": "order=9", "retrycap.dev/injected": "1", "other.io/x": "y",
			// The injector's: a warning that they are ignored was false.
			"retrycap.dev/proxy-cpu-request": "50m", "retrycap.dev/proxy-cpu-limit": "1",
			"retrycap.dev/proxy-memory-request": "40Mi", "retrycap.dev/proxy-memory-limit": "96Mi"}},
		{name: "a key that differs only in case is malformed", annotations: map[string]string{"retrycap.dev/Upstreams": "order=9"},
			miscased: []string{`Deployment shop/web: annotation retrycap.dev/Upstreams="order=9": annotation keys are case-sensitive and retrycap reads only retrycap.dev/upstreams, so this value would not be counted; rename the key`}},
		{name: "a key with an invisible or look-alike character is malformed, quoted so that it shows", annotations: map[string]string{
			"retrycap.dev/up\u200bstreams": "order=9", "retrycap.dev/upstre\u0430ms": "order=9"},
			miscased: []string{
				`Deployment shop/web: annotation "retrycap.dev/upstre\u0430ms"="order=9": the key holds 'а' (U+0430), which is not ASCII (a look-alike or an invisible character): the API server refuses such a key, and retrycap reads only retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}`,
				`Deployment shop/web: annotation "retrycap.dev/up\u200bstreams"="order=9": the key holds '\u200b' (U+200B), which is not ASCII (a look-alike or an invisible character): the API server refuses such a key, and retrycap reads only retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}`}},
		{name: "any other key is ignored, said", annotations: map[string]string{"retrycap.dev/upstream": "payment=9", "retrycap.dev/retries": "3"},
			unknown: []string{
				`Deployment shop/web: annotation retrycap.dev/retries="3" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`,
				`Deployment shop/web: annotation retrycap.dev/upstream="payment=9" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`}},
		{name: "a long value is clipped", annotations: map[string]string{"retrycap.dev/x": long},
			unknown: []string{`Deployment shop/web: annotation retrycap.dev/x="` + long[:200] + `... (300 bytes)" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := Workload{Kind: "Deployment", Namespace: "shop", Name: "web", Annotations: PairsOf(c.annotations)}
			miscased, unknown := StrayKeys(w)
			if !slices.Equal(miscased, c.miscased) || !slices.Equal(unknown, c.unknown) {
				t.Errorf("StrayKeys:\n miscased %q\n want     %q\n unknown  %q\n want     %q", miscased, c.miscased, unknown, c.unknown)
			}
		})
	}
}
