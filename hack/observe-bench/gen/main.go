// Command gen writes N access-log lines over K keys for observe's benchmark
// (hack/observe-bench/run.sh): half Istio's default text format, three tenths Istio's JSON
// format, two tenths retrycap-proxy's JSON log, a key's lines all of one format, the keys
// picked by a fixed pseudo-random sequence (the same file for the same N and K), the times
// spread over a day. Nothing is kept per line: it writes as it goes.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	n := flag.Int("n", 1_000_000, "lines")
	k := flag.Int("k", 100_000, "keys")
	flag.Parse()
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	x := uint64(0x9E3779B97F4A7C15)
	svcs := []string{"frontend", "checkout", "payment"}
	for i := 0; i < *n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		key := int(x % uint64(*k))
		t := t0.Add(time.Duration(i) * (24 * time.Hour / time.Duration(*n)))
		svc := svcs[(x>>20)%3]
		code := 200
		if (x>>24)%4 == 0 {
			code = 503
		}
		inbound := (x>>28)%2 == 0
		switch f := key % 10; {
		case f < 5:
			cluster, sni := "outbound|8080||"+svc+".shop.svc.cluster.local", "-"
			if inbound {
				cluster, sni = "inbound|8080||", "outbound_.8080_._."+svc+".shop.svc.cluster.local"
			}
			fmt.Fprintf(w, `[%s] "POST /%s?cart=%d HTTP/1.1" %d - via_upstream - "-" 412 91 %d %d "-" "Go-http-client/1.1" "%08x-1f2a-4e8d-8c7b-%012x" "shop.example.com" "10.44.2.17:8080" %s 127.0.0.6:43611 10.44.2.17:8080 10.44.1.23:37943 %s default`+"\n",
				t.Format("2006-01-02T15:04:05.000Z"), svc, key, code, 3+x%50, 2+x%50, key, key*7919, cluster, sni)
		case f < 8:
			cluster, sni := "outbound|8080||"+svc+".shop.svc.cluster.local", "null"
			if inbound {
				cluster, sni = "inbound|8080||", `"outbound_.8080_._.`+svc+`.shop.svc.cluster.local"`
			}
			fmt.Fprintf(w, `{"authority":"shop.example.com","bytes_received":412,"bytes_sent":91,"connection_termination_details":null,"downstream_local_address":"10.44.2.17:8080","downstream_remote_address":"10.44.1.23:41120","duration":%d,"method":"POST","path":"/%s","protocol":"HTTP/1.1","request_id":"%08x-1f2a-4e8d-8c7b-%012x","requested_server_name":%s,"response_code":%d,"response_code_details":"via_upstream","response_flags":"-","route_name":"default","start_time":"%s","upstream_cluster":"%s","upstream_host":"10.44.3.9:8080","upstream_local_address":"127.0.0.6:39021","upstream_service_time":"3","upstream_transport_failure_reason":null,"user_agent":"Go-http-client/1.1","x_forwarded_for":null}`+"\n",
				3+x%50, svc, key, key*7919, sni, code, t.Format("2006-01-02T15:04:05.000Z"), cluster)
		default:
			fmt.Fprintf(w, `{"log":"retrycap-access","time":"%s","service":"web","upstream":"%s","method":"POST","authority":"%s:8080","path":"/pay","attempt":%d,"budget_in":4,"budget_out":1,"status":%d,"duration_us":%d,"trace_id":"%016x%016x","idempotency_key":"order-%d"}`+"\n",
				t.Format("2006-01-02T15:04:05.000000Z"), svc, svc, 1+x%3, code, 500+x%90000, uint64(key)*0x9E3779B97F4A7C15, (x>>40)%3, key)
		}
	}
}
