package inject

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestProxyResources is the rules of the proxy resource annotations, with their exact messages.
// Before them the annotations were ignored: every proxy got 10m/32Mi, 2/64Mi and GOMAXPROCS 2.
func TestProxyResources(t *testing.T) {
	const who = "Deployment shop/gateway"
	type want struct {
		cpuReq, cpuLim, memReq, memLim, threads string
		warnings                                []string
	}
	defaults := want{"10m", "2", "32Mi", "64Mi", "2", nil}
	with := func(f func(*want)) want { w := defaults; f(&w); return w }
	const (
		cpuReq = "retrycap.dev/proxy-cpu-request"
		cpuLim = "retrycap.dev/proxy-cpu-limit"
		memReq = "retrycap.dev/proxy-memory-request"
		memLim = "retrycap.dev/proxy-memory-limit"
	)
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want want
		err  string
	}{
		{name: "none", ann: nil, want: defaults},
		{name: "others ignored", ann: map[string]string{"retrycap.dev/upstreams": "a", "sidecar.istio.io/proxyCPU": "1"}, want: defaults},
		{name: "cpu request", ann: map[string]string{cpuReq: "50m"}, want: with(func(w *want) { w.cpuReq = "50m" })},
		{name: "cpu request equal to the default limit", ann: map[string]string{cpuReq: "2"}, want: with(func(w *want) { w.cpuReq = "2" })},
		{name: "cpu request 0", ann: map[string]string{cpuReq: "0"}, want: with(func(w *want) { w.cpuReq = "0" })},
		{name: "cpu limit 1", ann: map[string]string{cpuLim: "1"}, want: with(func(w *want) { w.cpuLim, w.threads = "1", "1" })},
		{name: "cpu limit 500m", ann: map[string]string{cpuLim: "500m"}, want: with(func(w *want) { w.cpuLim, w.threads = "500m", "1" })},
		{name: "cpu limit 0.5 canonical", ann: map[string]string{cpuLim: "0.5"}, want: with(func(w *want) { w.cpuLim, w.threads = "500m", "1" })},
		{name: "cpu limit 1001m", ann: map[string]string{cpuLim: "1001m"}, want: with(func(w *want) { w.cpuLim, w.threads = "1001m", "2" })},
		{name: "cpu limit 4: GOMAXPROCS at most 2", ann: map[string]string{cpuLim: "4"}, want: with(func(w *want) { w.cpuLim, w.threads = "4", "2" })},
		{name: "cpu limit 2: set, GOMAXPROCS 2", ann: map[string]string{cpuLim: "2"}, want: with(func(w *want) { w.cpuLim = "2" })},
		{name: "cpu limit 1e3", ann: map[string]string{cpuLim: "1e3"}, want: with(func(w *want) { w.cpuLim = "1e3" })},
		{name: "cpu limit below the default request lowers it", ann: map[string]string{cpuLim: "5m"}, want: with(func(w *want) { w.cpuReq, w.cpuLim, w.threads = "5m", "5m", "1" })},
		{name: "memory request", ann: map[string]string{memReq: "24Mi"}, want: with(func(w *want) { w.memReq = "24Mi" })},
		{name: "memory limit", ann: map[string]string{memLim: "128Mi"}, want: with(func(w *want) { w.memLim = "128Mi" })},
		{name: "memory limit at the warning bound", ann: map[string]string{memLim: "32Mi"}, want: with(func(w *want) { w.memLim = "32Mi" })},
		{name: "memory limit at the floor: warned, request lowered", ann: map[string]string{memLim: "20Mi"}, want: with(func(w *want) {
			w.memReq, w.memLim = "20Mi", "20Mi"
			w.warnings = []string{`annotation retrycap.dev/proxy-memory-limit "20Mi" is below 32Mi: the proxy holds up to about 23 MiB under load, so it may be killed for memory (OOMKilled) under load`}
		})},
		{name: "all four equal", ann: map[string]string{cpuReq: "1", cpuLim: "1", memReq: "48Mi", memLim: "48Mi"},
			want: want{"1", "1", "48Mi", "48Mi", "1", nil}},

		{name: "bad quantity", ann: map[string]string{cpuLim: "2x"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-cpu-limit "2x" is not a Kubernetes quantity (such as 500m, 1 or 48Mi): quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{name: "bytes in the wrong unit", ann: map[string]string{memLim: "64MB"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-memory-limit "64MB" is not a Kubernetes quantity (such as 500m, 1 or 48Mi): quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{name: "empty", ann: map[string]string{memReq: ""},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-memory-request "" is not a Kubernetes quantity (such as 500m, 1 or 48Mi): quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{name: "blank around", ann: map[string]string{cpuReq: " 50m"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-cpu-request " 50m" is not a Kubernetes quantity (such as 500m, 1 or 48Mi): quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{name: "negative", ann: map[string]string{cpuReq: "-10m"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-cpu-request "-10m": the proxy's CPU request must not be negative`},
		{name: "cpu limit 0", ann: map[string]string{cpuLim: "0"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-cpu-limit "0": the proxy's CPU limit must be above 0 (without the annotation it is 2)`},
		{name: "memory limit 0", ann: map[string]string{memLim: "0"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-memory-limit "0": the proxy's memory limit must be above 0 (without the annotation it is 64Mi)`},
		{name: "memory limit below the floor", ann: map[string]string{memLim: "19Mi"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-memory-limit "19Mi" is below 20Mi, the least the proxy runs in: it holds about 18 MiB idle, so it would be killed for memory (OOMKilled) before it served`},
		{name: "memory limit in bytes below the floor", ann: map[string]string{memLim: "20M"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-memory-limit "20M" is below 20Mi, the least the proxy runs in: it holds about 18 MiB idle, so it would be killed for memory (OOMKilled) before it served`},
		{name: "cpu request above cpu limit", ann: map[string]string{cpuReq: "2", cpuLim: "1"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-cpu-request "2" is above annotation retrycap.dev/proxy-cpu-limit "1": the proxy's CPU request may not exceed its CPU limit`},
		{name: "memory request above memory limit", ann: map[string]string{memReq: "64Mi", memLim: "48Mi"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-memory-request "64Mi" is above annotation retrycap.dev/proxy-memory-limit "48Mi": the proxy's memory request may not exceed its memory limit`},
		{name: "cpu request above the default limit", ann: map[string]string{cpuReq: "2001m"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-cpu-request "2001m" is above the proxy's default CPU limit 2: a request may not exceed its limit; set retrycap.dev/proxy-cpu-limit too`},
		{name: "memory request above the default limit", ann: map[string]string{memReq: "128Mi"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-memory-request "128Mi" is above the proxy's default memory limit 64Mi: a request may not exceed its limit; set retrycap.dev/proxy-memory-limit too`},
		{name: "the first bad annotation in order is named", ann: map[string]string{cpuReq: "x", memLim: "1Mi"},
			err: `Deployment shop/gateway: annotation retrycap.dev/proxy-cpu-request "x" is not a Kubernetes quantity (such as 500m, 1 or 48Mi): quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, threads, warnings, err := proxyResources(who, "shop", nil, tc.ann)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v\nwant    %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := want{res.Requests.Cpu().String(), res.Limits.Cpu().String(), res.Requests.Memory().String(), res.Limits.Memory().String(), threads, warnings}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if len(res.Requests) != 2 || len(res.Limits) != 2 {
				t.Fatalf("resources %v: want cpu and memory only", res)
			}
		})
	}
}

// TestProxyResourcesNotShared: each call returns its own lists (the defaults are not shared
// between pods: podLevelRoom and later patches must not change another pod's proxy).
func TestProxyResourcesNotShared(t *testing.T) {
	a, _, _, _ := proxyResources("Pod shop/a", "shop", nil, nil)
	b, _, _, _ := proxyResources("Pod shop/b", "shop", nil, nil)
	a.Requests[corev1.ResourceCPU] = a.Limits[corev1.ResourceCPU]
	if got := b.Requests.Cpu().String(); got != "10m" {
		t.Fatalf("b's CPU request = %s after a's changed", got)
	}
}

// TestParseProxyResourcesError: a refusal carries the annotation and the value, for a caller
// that names the workload its own way (the gate's workload.AnnotationError).
func TestParseProxyResourcesError(t *testing.T) {
	_, err := ParseProxyResources(map[string]string{"retrycap.dev/proxy-cpu-request": "2", "retrycap.dev/proxy-cpu-limit": "1"})
	var e *ResourceError
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *ResourceError", err, err)
	}
	const want = `annotation retrycap.dev/proxy-cpu-request "2" is above annotation retrycap.dev/proxy-cpu-limit "1": the proxy's CPU request may not exceed its CPU limit`
	if e.Annotation != "retrycap.dev/proxy-cpu-request" || e.Value != "2" || err.Error() != want {
		t.Fatalf("Annotation %q, Value %q, error %q", e.Annotation, e.Value, err)
	}
	_, _, _, err = proxyResources("Pod shop/a", "shop", nil, map[string]string{"retrycap.dev/proxy-cpu-request": "2", "retrycap.dev/proxy-cpu-limit": "1"})
	if !errors.As(err, &e) || err.Error() != "Pod shop/a: "+want {
		t.Fatalf("the injector's error %q", err)
	}
}
