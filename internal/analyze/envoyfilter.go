package analyze

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// An Istio EnvoyFilter can patch Envoy's retry policy into a route or a virtual host (applyTo
// HTTP_ROUTE or VIRTUAL_HOST, patch.value route.retry_policy / retry_policy), as public guides do
// to change retry_on or the backoff: the tries it sets are not modelled (the EnvoyFilter's match
// is Envoy's own configuration, not a Service), so analyze says so instead of counting the
// object among the ignored kinds without a word.

// envoyRetryKeys are the keys of Envoy's RetryPolicy (and the route's field holding it), in
// the proto's snake case and the JSON camel case an EnvoyFilter's value may use.
var envoyRetryKeys = []string{"retry_policy", "retryPolicy", "num_retries", "numRetries", "retry_on", "retryOn"}

// envoyFilterRetries returns the spec.configPatches[i].patch.value paths of an EnvoyFilter
// that set a retry key, in order ("spec.configPatches[0].patch.value.route.retry_policy").
func envoyFilterRetries(js []byte) []string {
	var o struct {
		Spec struct {
			ConfigPatches []struct {
				Patch struct {
					Value any `json:"value"`
				} `json:"patch"`
			} `json:"configPatches"`
		} `json:"spec"`
	}
	if json.Unmarshal(js, &o) != nil {
		return nil
	}
	var out []string
	var walk func(v any, path string) bool
	walk = func(v any, path string) bool {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if slices.Contains(envoyRetryKeys, k) {
					out = append(out, path+"."+k)
					return true
				}
				if walk(t[k], path+"."+k) {
					return true
				}
			}
		case []any:
			for i, e := range t {
				if walk(e, fmt.Sprintf("%s[%d]", path, i)) {
					return true
				}
			}
		}
		return false
	}
	for i, p := range o.Spec.ConfigPatches {
		walk(p.Patch.Value, fmt.Sprintf("spec.configPatches[%d].patch.value", i))
	}
	return out
}

// warnEnvoyFilterRetries warns about an EnvoyFilter that sets Envoy's retry policy.
func (r Reader) warnEnvoyFilterRetries(m *Manifests, src Source, tm *typeMeta, js []byte) {
	if tm.Kind != "EnvoyFilter" || apiGroup(tm.APIVersion) != "networking.istio.io" {
		return
	}
	paths := envoyFilterRetries(js)
	if len(paths) == 0 {
		return
	}
	m.warn(src, "%s: %s patches Envoy's retry policy: not counted (retrycap reads the retries of VirtualServices and routes, not EnvoyFilter patches); the tries it sets multiply the calls its match selects: declare them on a VirtualService route instead, or check them by hand",
		r.ident(tm), strings.Join(paths, ", "))
}
