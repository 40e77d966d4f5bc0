package observe

import (
	"fmt"
	"strings"
	"testing"
)

// TestRealFormats: lines of the access-log formats real proxies write by default, each read as
// an attempt or counted as not read with why, never lumped with an application's output as
// "skipped" and never taken for an attempt it is not (before: a TCP connection line of Envoy's
// and Istio's default formats counted as a failed HTTP attempt, status 0; nginx, HAProxy, other
// JSON access logs and Docker's json-file wrapper were "skipped" like a startup message, so a
// file of them said "no access-log line ... is the access log on?").
func TestRealFormats(t *testing.T) {
	const (
		attempt = "attempt"
		skipped = "skipped"
	)
	for _, c := range []struct{ name, line, want string }{
		// Envoy's default format (13 fields): an HTTP request, and a TCP connection.
		{"envoy http", `[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 503 UF 0 91 12 - "-" "curl/8.5.0" "7c1a4b2e-93d0-9b41-a1f5-2f0d6e1c8a30" "catalog.shop:8080" "10.44.4.2:8080"`, attempt},
		{"envoy tcp", `[2026-11-24T14:06:00.000Z] "- - -" 0 - 412 91 12 - "-" "-" "-" "-" "10.44.4.2:5432"`, "an Envoy TCP connection line (no HTTP method, response code 0): a connection, not an HTTP attempt"},
		// Istio's default text format (22 fields, Istio 1.9 on): a TCP connection to a database.
		{"istio text tcp", `[2026-11-24T14:02:11.118Z] "- - -" 0 - - - "-" 6351 15841 10273 - "-" "-" "-" "-" "10.44.2.30:5432" outbound|5432||postgres.shop.svc.cluster.local 10.44.1.23:41840 10.96.0.40:5432 10.44.1.23:41830 - -`, "an Envoy TCP connection line (no HTTP method, response code 0): a connection, not an HTTP attempt"},
		{"istio text http 0 DC", `[2026-11-24T14:02:11.118Z] "POST /checkout HTTP/1.1" 0 DC downstream_remote_disconnect - "-" 412 0 170 - "-" "Go-http-client/1.1" "7c1a4b2e-93d0-9b41-a1f5-2f0d6e1c8a31" "checkout:8080" "10.44.2.17:8080" outbound|8080||checkout.shop.svc.cluster.local 10.44.1.23:35027 10.0.45.184:8080 10.44.1.23:51910 - default`, attempt},
		// Istio's JSON: a TCP connection has a null method and response code 0.
		{"istio json tcp", `{"authority":null,"bytes_received":6351,"bytes_sent":15841,"connection_termination_details":null,"downstream_local_address":"10.96.0.40:5432","downstream_remote_address":"10.44.1.23:41830","duration":10273,"method":null,"path":null,"protocol":null,"request_id":null,"requested_server_name":null,"response_code":0,"response_code_details":null,"response_flags":"-","route_name":null,"start_time":"2026-11-24T14:02:11.118Z","upstream_cluster":"outbound|5432||postgres.shop.svc.cluster.local","upstream_host":"10.44.2.30:5432","upstream_local_address":"10.44.1.23:41840","upstream_service_time":null,"upstream_transport_failure_reason":null,"user_agent":null,"x_forwarded_for":null}`, "an Envoy TCP connection line (no HTTP method, response code 0): a connection, not an HTTP attempt"},
		// nginx's combined and common formats; ingress-nginx's default (which extends combined) is read.
		{"nginx combined", `10.244.0.1 - - [24/Nov/2026:14:02:11 +0000] "GET /checkout HTTP/1.1" 502 157 "-" "curl/8.5.0"`, whyNginx},
		{"nginx common", `10.244.0.1 - alice [24/Nov/2026:14:02:11 -0700] "POST /pay HTTP/1.1" 200 12`, whyNginx},
		{"ingress-nginx", `10.244.0.1 - - [24/Nov/2026:14:02:11 +0000] "GET /checkout HTTP/1.1" 502 157 "-" "curl/8.5.0" 85 0.012 [shop-checkout-8080] [] 10.44.2.17:8080, 10.44.2.18:8080 0, 157 0.004, 0.008 502, 502 6d8e6f2c0f6e4a4b9b1c7e2d3a4f5b6c`, attempt},
		// HAProxy's HTTP log, on stdout and through syslog.
		{"haproxy", `10.0.1.2:33317 [06/Feb/2026:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"`, whyHAProxy},
		{"haproxy syslog", `Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2026:12:14:14.655] http-in static/srv1 10/0/30/69/109 503 2750 - - ---- 1/1/1/1/3 0/0 "GET /index.html HTTP/1.1"`, whyHAProxy},
		// JSON access logs of other shapes (nginx's log_format escape=json as ingress-nginx
		// documents it), and Docker's json-file wrapper around an Envoy line.
		{"nginx json", `{"time": "2026-11-24T14:02:11+00:00", "request_id": "6d8e6f2c0f6e4a4b9b1c7e2d3a4f5b6c", "remote_addr": "10.244.0.1", "status": 502, "request_time": 0.012, "method": "GET", "path": "/checkout"}`, whyJSON},
		{"docker json-file", `{"log":"[2026-11-24T14:06:00.000Z] \"GET /catalog HTTP/1.1\" 503 UF 0 91 12 - \"-\" \"curl/8.5.0\" \"envoy-1\" \"catalog.shop:8080\" \"10.44.4.2:8080\"\n","stream":"stdout","time":"2026-11-24T14:06:00.000123456Z"}`, whyDocker},
		// Cloud load balancers' logs (hand-written after the providers' documented fields):
		// before, skipped as an application's output, and a run over them said "is the access
		// log on?".
		{"aws alb", `http 2026-12-01T10:00:00.123456Z app/my-loadbalancer/50dc6c495c0c9188 192.168.131.39:2817 10.0.0.1:80 0.000 0.001 0.000 502 502 34 366 "GET http://www.example.com:80/ HTTP/1.1" "curl/7.46.0" - - arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 "Root=1-58337262-36d228ad5d99923122bbe354" "-" "-" 0 2026-12-01T10:00:00.122000Z "forward" "-" "-" "10.0.0.1:80" "502" "-" "-" TID_1234`, whyALB},
		{"aws alb h2", `h2 2026-12-01T10:00:00.123456Z app/my-loadbalancer/50dc6c495c0c9188 10.0.1.252:48160 10.0.0.66:9000 0.000 0.002 0.000 200 200 5 257 "GET https://10.0.2.105:773/ HTTP/2.0" "curl/7.46.0" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 "Root=1-58337327-72bd00b0343d75b906739c42" "-" "-" 1 2026-12-01T10:00:00.121000Z "redirect" "https://example.com:80/" "-" "10.0.0.66:9000" "200" "-" "-" TID_1234`, whyALB},
		{"gcp lb", `{"httpRequest":{"requestMethod":"GET","requestUrl":"https://shop.example.com/","status":502,"latency":"0.012s","remoteIp":"203.0.113.7"},"resource":{"type":"http_load_balancer"},"timestamp":"2026-12-01T10:00:00.123Z","trace":"projects/p/traces/4bf92f3577b34da6a3ce929d0e0e4736","jsonPayload":{"statusDetails":"failed_to_connect_to_backend"}}`, whyGCPLB},
		{"app text with http", `http 2026-12-01T10:00:00Z listening on :8080`, skipped},
		// An application's own output stays skipped.
		{"app json", `{"level":"info","ts":"2026-11-24T14:02:11Z","msg":"listening","addr":":8080"}`, skipped},
		{"app text", `2026-11-24 14:02:11 INFO started in 3.2 s`, skipped},
		{"a dash", `- - -`, skipped},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := NewGrouper().Consume(strings.NewReader(c.line+"\n"), Source{Name: "f"}, DefaultMaxLine)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch {
			case st.Attempts-st.ListedRetries == 1:
				got = attempt
			case st.Skipped == 1:
				got = skipped
			case st.Unread == 1:
				got = strings.TrimPrefix(st.FirstUnread, "f: line 1: ")
			default:
				got = "bad: " + st.FirstBad
			}
			if got != c.want || st.Lines != 1 {
				t.Errorf("got %q, want %q (%+v)", got, c.want, st)
			}
		})
	}
}

// TestUnreadAddsUp: not-read lines are their own count, and the counters add up to the lines.
func TestUnreadAddsUp(t *testing.T) {
	in := strings.Join([]string{
		`10.244.0.1 - - [24/Nov/2026:14:02:11 +0000] "GET /checkout HTTP/1.1" 502 157 "-" "curl/8.5.0"`,
		`[2026-11-24T14:06:00.000Z] "- - -" 0 - 412 91 12 - "-" "-" "-" "-" "10.44.4.2:5432"`,
		`[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 503 UF 0 91 12 - "-" "curl/8.5.0" "envoy-1" "catalog.shop:8080" "10.44.4.2:8080"`,
		`started`,
	}, "\n") + "\n"
	st, err := NewGrouper().Consume(strings.NewReader(in), Source{Name: "mixed.log"}, DefaultMaxLine)
	want := Stats{Lines: 4, Attempts: 1, Skipped: 1, Unread: 2, FirstUnread: "mixed.log: line 1: " + whyNginx}
	if err != nil || st != want {
		t.Fatalf("got %+v, %v\nwant %+v", st, err, want)
	}
	if st.Attempts+st.Skipped+st.Unread+st.Bad+st.TooLong != st.Lines {
		t.Fatalf("the counters do not add up: %+v", st)
	}
	if got, want := st.String(), "4 lines read: 1 attempts, 1 skipped, 2 not read (the first: mixed.log: line 1: "+whyNginx+"), 0 bad, 0 over the line limit"; got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
}

// TestEnvoyGatewayJSON: Envoy Gateway's default JSON access log (its own key names:
// "x-request-id", ":authority", "x-envoy-origin-path"; clusters named after the route rule) is
// read keyed by its request id and named by its HTTPRoute (before: no key, so no attempt was
// grouped, and the callee was the browser's Host).
func TestEnvoyGatewayJSON(t *testing.T) {
	line := func(rid string, code int) string {
		return `{":authority":"www.example.com","bytes_received":0,"bytes_sent":91,"connection_termination_details":null,"downstream_local_address":"10.244.0.14:10080","downstream_remote_address":"10.244.0.1:41234","duration":12,"method":"POST","protocol":"HTTP/1.1","requested_server_name":null,"response_code":` +
			itoa(int64(code)) + `,"response_code_details":"via_upstream","response_flags":"-","route_name":"httproute/shop/checkout/rule/0/match/0/www_example_com","start_time":"2026-11-24T14:06:00.000Z","upstream_cluster":"httproute/shop/checkout/rule/0","upstream_host":"10.244.0.13:8080","upstream_local_address":"10.244.0.14:58822","upstream_transport_failure_reason":null,"user-agent":"curl/8.5.0","x-envoy-origin-path":"/checkout?cart=7","x-envoy-upstream-service-time":"11","x-forwarded-for":"10.244.0.1","x-request-id":"` + rid + `"}`
	}
	var in strings.Builder
	for _, l := range []string{line("r-1", 503), line("r-1", 503), line("r-1", 200), line("r-2", 200)} {
		in.WriteString(l + "\n")
	}
	g := NewGrouper()
	st, err := g.Consume(strings.NewReader(in.String()), Source{Name: "eg.log", Service: "envoy-gateway"}, DefaultMaxLine)
	if err != nil || st != (Stats{Lines: 4, Attempts: 4}) {
		t.Fatalf("%+v %v", st, err)
	}
	kr, ok := g.Key("r-1")
	if !ok || kr.Kind != "request-id" || kr.Attempts != 3 || kr.Failures != 2 || len(kr.Services) != 1 || kr.Services[0].Service != "checkout" {
		t.Fatalf("key r-1: %+v %v", kr, ok)
	}
	a, ok, err := ParseLine([]byte(line("r-3", 200)), Source{})
	if err != nil || !ok || a.Path != "/checkout" || a.Authority != "www.example.com" || a.Target != "checkout" || a.RequestID != "r-3" {
		t.Fatalf("%+v %v %v", a, ok, err)
	}
}

// TestQuoteInHeader: Envoy writes header values unescaped (envoyproxy/envoy#4191), so a
// User-Agent with a quote in it splits its field. Such a line is bad, never read with its
// fields shifted; one that reaches the other format's count by chance is named for what it
// is (before: "22 fields, want exactly 13 ... or 22").
func TestQuoteInHeader(t *testing.T) {
	for _, tc := range []struct{ line, why string }{
		{`[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 503 UF 0 91 12 - "-" "curl "x" y" "rid-q" "catalog.shop:8080" "10.44.4.2:8080"`,
			`envoy text line: 15 fields, want exactly 13 (Envoy's default format) or 22 (Istio's)`},
		{`[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 503 UF 0 91 12 - "-" "x" 1 2 3 4 5 6 7 8 "y" "rid-real" "catalog.shop:8080" "10.44.4.2:8080"`,
			`envoy text line: 22 fields, but not quoted where Envoy's default format or Istio's quotes them (a header value with a " in it? Envoy writes it unescaped)`},
	} {
		st, err := NewGrouper().Consume(strings.NewReader(tc.line+"\n"), Source{Name: "f"}, DefaultMaxLine)
		if want := "f: line 1: " + tc.why; err != nil || st.Bad != 1 || st.Lines != 1 || st.FirstBad != want {
			t.Errorf("%+v %v\nwant %s", st, err, want)
		}
	}
}

// TestOutboundHostOutsideMesh: an outbound cluster to a host outside the mesh (a ServiceEntry's
// api.stripe.com) names the whole host; the mesh's services keep their first label, whatever
// the cluster domain. Before: api.stripe.com was "api", merged with the mesh's own api.
func TestOutboundHostOutsideMesh(t *testing.T) {
	line := func(rid, cluster string) string {
		return `[2026-11-24T14:02:11.118Z] "GET /a HTTP/1.1" 503 UF via_upstream - "-" 0 91 10 - "-" "curl" "` + rid + `" "shop.example.com" "1.2.3.4:443" ` + cluster + ` 10.44.1.23:35027 1.2.3.4:443 10.44.1.23:51910 - default`
	}
	g := NewGrouper()
	in := line("ext", "outbound|443||API.Stripe.com") + "\n" + line("ext", "outbound|8080||api.shop.svc.cluster.local") + "\n" +
		line("dom", "outbound|8080|v2|checkout.shop.svc.corp.example") + "\n" + line("dom", "outbound|8080||checkout.shop.svc") + "\n" +
		line("short", "outbound|8080||checkout") + "\n" + line("ip", "outbound|8080||10.0.0.7") + "\n"
	if st, err := g.Consume(strings.NewReader(in), Source{Name: "f"}, DefaultMaxLine); err != nil || st.Attempts != 6 {
		t.Fatalf("%+v %v", st, err)
	}
	for key, want := range map[string]string{"ext": "api 1 > api.stripe.com 1", "dom": "checkout 2", "short": "checkout 1", "ip": "10.0.0.7 1"} {
		kr, _ := g.Key(key)
		var got []string
		for _, s := range kr.Services {
			got = append(got, fmt.Sprintf("%s %d", s.Service, s.Attempts))
		}
		if strings.Join(got, " > ") != want {
			t.Errorf("key %s: services %q, want %q", key, strings.Join(got, " > "), want)
		}
	}
}
