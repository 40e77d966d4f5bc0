package mesh

import (
	"fmt"
	"strings"
	"time"
)

// Consul service mesh (hashicorp/consul): a caller whose pod template has
// consul.hashicorp.com/connect-inject "true" runs an Envoy sidecar. Its retries to a Service v
// come from the ServiceRouter (consul.hashicorp.com/v1alpha1) named v in v's namespace,
// spec.routes[].destination, translated by agent/xds/routes.go getRetryPolicyForDestination:
// numRetries > 0 sets Envoy's num_retries, and retryOn, retryOnConnectFailure and
// retryOnStatusCodes make Envoy's retry_on. A destination with no retry condition has an empty
// retry_on, and Envoy retries nothing: numRetries alone gives no retry. With a condition and no
// numRetries, Envoy's default 1 retry. No ServiceRouter: Consul sets no retry policy (1 try).
// The largest over the routes applies (which route a request takes is not known).
const (
	GroupConsul              = "consul.hashicorp.com"
	ConsulConnectInject      = "consul.hashicorp.com/connect-inject"
	Consul              Kind = "Consul"
)

type serviceRouter struct {
	header
	Spec struct {
		Routes []struct {
			Destination *struct {
				NumRetries            int64    `json:"numRetries"`
				RetryOn               []string `json:"retryOn"`
				RetryOnConnectFailure bool     `json:"retryOnConnectFailure"`
				RetryOnStatusCodes    []int    `json:"retryOnStatusCodes"`
				RequestTimeout        string   `json:"requestTimeout"`
			} `json:"destination"`
		} `json:"routes"`
	} `json:"spec"`
}

func (s *Set) addServiceRouter(key string, h header, decode func(any) error) error {
	r := &serviceRouter{}
	if err := decode(r); err != nil {
		return err
	}
	r.header = h
	for i, rt := range r.Spec.Routes {
		if d := rt.Destination; d != nil {
			if err := boundsInt32.check(h.id(), fmt.Sprintf("spec.routes[%d].destination.numRetries", i), d.NumRetries); err != nil {
				return err
			}
			// Consul parses it with time.ParseDuration (agent/structs/config_entry_discoverychain.go
			// ServiceRouteDestination.UnmarshalJSON) and refuses the config entry otherwise.
			if v := d.RequestTimeout; v != "" {
				if _, err := time.ParseDuration(v); err != nil {
					return fmt.Errorf("%s spec.routes[%d].destination.requestTimeout: %q is not a Go duration such as 15s (Consul refuses the config entry)", h.id(), i, v)
				}
			}
		}
	}
	s.routers[key] = r
	return nil
}

// consulEdge adds the Consul layer of a call from c to the in-cluster Service ref.
func (s *Set) consulEdge(e *Edge, c Caller, ref ServiceRef) {
	if c.Annotations[ConsulConnectInject] != "true" {
		return
	}
	var best Layer
	r, ok := s.routers[GroupConsul+"/ServiceRouter/"+ref.Namespace+"/"+ref.Name]
	if ok {
		for i, rt := range r.Spec.Routes {
			d := rt.Destination
			if d == nil {
				continue
			}
			path := fmt.Sprintf("spec.routes[%d].destination.numRetries", i)
			if len(d.RetryOn) == 0 && !d.RetryOnConnectFailure && len(d.RetryOnStatusCodes) == 0 {
				if d.NumRetries > 0 {
					better(&best, Layer{Kind: Consul, Object: r.id(), FieldPath: path, Tries: 1,
						Note: fmt.Sprintf("Consul %s: numRetries %d with no retry condition retries nothing", r.id(), d.NumRetries)})
				}
				continue
			}
			n, note, unset := d.NumRetries, fmt.Sprintf("numRetries %d", d.NumRetries), false
			if n == 0 {
				n, note, unset = 1, "a retry condition without numRetries: Envoy's 1 retry", true
			}
			better(&best, Layer{Kind: Consul, Object: r.id(), FieldPath: path, Tries: n + 1, Default: unset, Note: fmt.Sprintf("Consul %s %s", r.id(), note)})
		}
	}
	if best.Kind == "" {
		best = Layer{Kind: Consul, Tries: 1, Default: true, Note: fmt.Sprintf("Consul: no ServiceRouter %s sets retries", ref)}
	}
	e.Layers = append(e.Layers, best)
}

// consulTime is a Consul layer's time: Envoy's backoff, and the route's timeout over all tries,
// the destination's requestTimeout (agent/xds/routes.go makeUpstreamRouteForDiscoveryChain sets
// the route's timeout from it). Without one, none: Envoy's route default of 15 s may apply, but a
// ServiceResolver's requestTimeout (not read) may set another, so no bound is assumed (an upper
// bound of the time). Before, a Consul layer never had a timeout.
func (s *Set) consulTime(l Layer) LayerTime {
	lt := LayerTime{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}
	i, ok := ruleIndex(l.FieldPath)
	if s == nil || l.Object == "" || !ok || !strings.HasPrefix(l.FieldPath, "spec.routes[") {
		return lt
	}
	for _, r := range s.routers {
		if r.id() != l.Object || i >= len(r.Spec.Routes) || r.Spec.Routes[i].Destination == nil {
			continue
		}
		if v := r.Spec.Routes[i].Destination.RequestTimeout; v != "" {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				lt.Timeout, lt.Source = d, fmt.Sprintf("%s spec.routes[%d].destination.requestTimeout", l.Object, i)
			}
		}
	}
	return lt
}
