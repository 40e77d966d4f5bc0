package telemetry

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/retrycap/retrycap/internal/annotations"
)

// ServiceRef is a reference to a Service found in an env value.
type ServiceRef struct {
	// Name and Namespace of the Service; Namespace "" when the value gives none (the caller's).
	Name, Namespace string
	Port            int32
	// Scheme is the URL's scheme, lower case, "" for host:port.
	Scheme string
	// Qualified: the value used the name.ns.svc[.cluster.local] form, which names a Service
	// whatever else the input holds.
	Qualified bool
}

// ParseServiceRefs reads the forms of an env value that name a Service: a URL
// ("http://payment:8080/charge", "postgresql://user@accounts-db:5432/db"), host:port
// ("payment:8080"), gRPC's dns: and xds:[//authority/]host[:port] ("dns:///payment:9090"), and name.ns,
// name.ns.svc, name.ns.svc.cluster.local with or without a port; a comma- or space-separated
// list of them. A bare name without a port is not read (a
// word is not an address), nor localhost, an IP address or a host outside the cluster forms.
func ParseServiceRefs(value string) []ServiceRef {
	var out []ServiceRef
	for _, tok := range strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == ';' || r == '\n' || r == '\t' }) {
		var host, port, scheme string
		if len(tok) > 4 && (strings.EqualFold(tok[:4], "dns:") || strings.EqualFold(tok[:4], "xds:")) {
			// gRPC's name syntax, dns:[//authority/]host[:port] (grpc/grpc doc/naming.md), and
			// xds:[//authority/]host[:port], the xDS resolver's (proxyless gRPC: Istio's
			// grpc-agent template, xds:///echo.echo-grpc.svc.cluster.local:7070): url.Parse
			// puts the host of dns:///order:9090 in the path, and named nothing.
			scheme, tok = strings.ToLower(tok[:3]), tok[4:]
			if strings.HasPrefix(tok, "//") {
				_, rest, ok := strings.Cut(tok[2:], "/")
				if !ok {
					continue // an authority (the DNS server) and no name
				}
				tok = rest
			}
		}
		if i := strings.Index(tok, "://"); i > 0 && scheme == "" {
			t := strings.TrimPrefix(tok, "jdbc:")
			u, err := url.Parse(t)
			if err != nil || u.Host == "" {
				continue
			}
			scheme, host, port = strings.ToLower(u.Scheme), u.Hostname(), u.Port()
		} else {
			h := tok
			if j := strings.IndexByte(h, '/'); j >= 0 {
				h = h[:j]
			}
			if j := strings.LastIndexByte(h, ':'); j >= 0 {
				host, port = h[:j], h[j+1:]
				if strings.Contains(host, ":") {
					continue // an IPv6 address or something else
				}
			} else {
				host = h
			}
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		var p int32
		if port != "" {
			n, err := strconv.ParseUint(port, 10, 16)
			if err != nil || n == 0 {
				continue
			}
			p = int32(n)
		}
		if host == "" || host == "localhost" || net.ParseIP(host) != nil {
			continue
		}
		r := ServiceRef{Port: p, Scheme: scheme}
		if svc, ns, ok := annotations.SplitService(host); ok {
			// A Service's name is a DNS-1035 label (it starts with a letter): "0.5" (a rate) and
			// "1.2" (a version) name none.
			if len(validation.IsDNS1035Label(svc)) > 0 || len(validation.IsDNS1123Label(ns)) > 0 {
				continue
			}
			r.Name, r.Namespace, r.Qualified = svc, ns, strings.Contains(host, ".svc")
		} else {
			if strings.Contains(host, ".") || len(validation.IsDNS1035Label(host)) > 0 {
				continue // a host outside the cluster, or not a name
			}
			if p == 0 && scheme == "" {
				continue // a bare word
			}
			r.Name = host
		}
		out = append(out, r)
	}
	return out
}

// httpSchemes are URL schemes of HTTP and gRPC calls; nonHTTPSchemes of protocols no HTTP
// retry applies to.
var (
	httpSchemes    = map[string]bool{"http": true, "https": true, "grpc": true, "grpcs": true, "h2c": true, "ws": true, "wss": true, "dns": true, "xds": true}
	nonHTTPSchemes = map[string]bool{"postgres": true, "postgresql": true, "mysql": true, "mariadb": true, "redis": true, "rediss": true, "mongodb": true, "mongodb+srv": true,
		"amqp": true, "amqps": true, "kafka": true, "nats": true, "tcp": true, "memcached": true, "cassandra": true, "sqlserver": true, "mssql": true, "zookeeper": true}
	// wellKnownTCP are the default ports of databases, caches and brokers.
	wellKnownTCP = map[int32]string{3306: "MySQL", 5432: "PostgreSQL", 6379: "Redis", 27017: "MongoDB", 9042: "Cassandra", 11211: "memcached",
		5672: "AMQP", 9092: "Kafka", 4222: "NATS", 2181: "ZooKeeper", 1433: "SQL Server", 26257: "CockroachDB"}
	// tcpPortPrefixes are the Service port name prefixes Istio's protocol selection reads as
	// TCP (istio.io "Protocol Selection"); httpPortPrefixes as HTTP or gRPC. Of the former, the
	// ones that name a protocol other than HTTP (tls, mongo, mysql, redis, udp) make an edge
	// nonHTTP; a plain tcp does not (NonHTTPReason).
	tcpPortPrefixes  = map[string]bool{"tcp": true, "tls": true, "mongo": true, "mysql": true, "redis": true, "udp": true}
	httpPortPrefixes = map[string]bool{"http": true, "http2": true, "https": true, "grpc": true, "grpc-web": true, "h2c": true}
)

// namesNonHTTP reports whether a port name's words after the first name a protocol no HTTP
// retry applies to (Online Boutique's tcp-redis): a plain tcp-service, tcp-web does not.
func namesNonHTTP(name string) bool {
	words := strings.Split(strings.ToLower(name), "-")
	for _, w := range words[1:] {
		if tcpPortPrefixes[w] || nonHTTPSchemes[w] {
			return true
		}
	}
	return false
}

// NonHTTPReason says why an edge to svc through r is not HTTP (no HTTP retry applies), "" when
// it is, or may be: the URL's scheme, then the Service port's appProtocol or name (Istio's
// prefixes), then a database's or broker's well-known port.
func NonHTTPReason(r ServiceRef, svc *ServiceDef) string {
	if httpSchemes[r.Scheme] {
		return ""
	}
	if nonHTTPSchemes[r.Scheme] {
		return "a " + r.Scheme + " URL: no HTTP retry applies"
	}
	if svc != nil {
		for _, p := range svc.Ports {
			if r.Port != 0 && p.Port != r.Port {
				continue
			}
			if r.Port == 0 && len(svc.Ports) != 1 {
				break
			}
			ap := strings.ToLower(p.AppProtocol)
			switch {
			case ap == "":
			case httpPortPrefixes[ap] || ap == "kubernetes.io/h2c" || ap == "kubernetes.io/ws" || ap == "kubernetes.io/wss":
				return ""
			case ap == "tcp":
				// Opaque to the mesh, not a protocol: as a tcp- name, below.
			default:
				return "Service port " + strconv.Itoa(int(p.Port)) + " has appProtocol " + p.AppProtocol + ": no HTTP retry applies"
			}
			prefix, _, _ := strings.Cut(strings.ToLower(p.Name), "-")
			if strings.HasPrefix(strings.ToLower(p.Name), "grpc-web") {
				prefix = "grpc-web"
			}
			if httpPortPrefixes[prefix] {
				return ""
			}
			if (prefix == "tcp" || ap == "tcp") && !namesNonHTTP(p.Name) {
				// "tcp" tells Istio to proxy the port as opaque TCP (it retries nothing there:
				// analyze's layers say so), not what the app speaks over it: the OpenTelemetry
				// demo names every gRPC and HTTP port tcp-service. The call is the app's, and
				// its own retries count: proposed, unless the port number is a database's.
				break
			}
			if tcpPortPrefixes[prefix] {
				return "Service port " + strconv.Itoa(int(p.Port)) + " is named " + p.Name + " (a TCP protocol): no HTTP retry applies"
			}
		}
	}
	if what, ok := wellKnownTCP[r.Port]; ok {
		return "port " + strconv.Itoa(int(r.Port)) + " (" + what + "): no HTTP retry applies"
	}
	return ""
}
