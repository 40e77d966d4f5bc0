package observe

import "bytes"

// Access logs observe recognises and cannot read as HTTP attempts. Each is counted in
// Stats.Unread with why (never lumped with the proxy's other output as "skipped"), so that a run
// over them says what it was given: without a request id (nginx's combined format, HAProxy's
// default HTTP log) there is nothing to group a request's attempts by, and a count of zero keys
// would read as "no amplification".

const (
	whyNginx = `a Common or Combined Log Format line (nginx's and Apache's defaults): ` +
		`it carries no request id to group attempts by, and observe does not read it (it reads ingress-nginx's default log-format-upstream; or use the Envoy, Istio or retrycap-proxy access log of the same traffic)`
	whyHAProxy = `an HAProxy log line (option httplog): its format carries no request id to group attempts by, and observe does not read it`
	whyDocker  = `a Docker json-file log line (the log driver's {"log","stream","time"} wrapper): read the container's log with kubectl logs, or the kubelet's CRI files`
	whyALB     = `an AWS Application Load Balancer access log line: observe does not read it (use the access log of the Envoy, Istio, ingress-nginx or retrycap proxies behind it, whose lines are the attempts)`
	whyGCPLB   = `a Google Cloud load balancer log entry (Cloud Logging's httpRequest): observe does not read it (use the access log of the Envoy, Istio, ingress-nginx or retrycap proxies behind it, whose lines are the attempts)`
	whyJSON    = `a JSON access-log line of a shape observe does not read (it reads retrycap-proxy's, and Envoy's and Istio's JSON with start_time and response_code)`
)

// unreadText says why a line that is neither JSON nor Envoy's text format is an access-log line
// observe does not read, "" when it is none it knows (an application's own output).
func unreadText(line []byte) string {
	// HAProxy through syslog: "Feb  6 12:14:14 localhost haproxy[14389]: " before the line.
	if i := bytes.Index(line, []byte("]: ")); i > 0 && i < 128 && bytes.Contains(line[:i], []byte("haproxy[")) {
		line = line[i+3:]
	}
	f1, rest := cutField(line)
	f2, rest := cutField(rest)
	// AWS ALB: type time elb client:port target:port ..., the elb "app/NAME/ID" (the docs'
	// "Access log entries" of Elastic Load Balancing); the types are ALB's.
	switch string(f1) {
	case "http", "https", "h2", "grpcs", "ws", "wss":
		if f3, _ := cutField(rest); bytes.HasPrefix(f3, []byte("app/")) {
			if _, ok := parseTime(f2); ok {
				return whyALB
			}
		}
	}
	// HAProxy: client_ip:port [06/Feb/2009:12:14:14.655] frontend backend/server ...
	if len(f2) > 2 && f2[0] == '[' && f2[len(f2)-1] == ']' && clfTime(f2[1:len(f2)-1], true) && hostPort(f1) {
		return whyHAProxy
	}
	// nginx: remote_addr - remote_user [24/Nov/2026:14:02:11 +0000] "GET / HTTP/1.1" ...
	if string(f2) != "-" || len(f1) == 0 {
		return ""
	}
	_, rest = cutField(rest)
	if len(rest) < 30 || rest[0] != '[' {
		return ""
	}
	end := bytes.IndexByte(rest, ']')
	if end < 0 || !clfTime(rest[1:end], false) || !bytes.HasPrefix(rest[end+1:], []byte(` "`)) {
		return ""
	}
	return whyNginx
}

// unreadJSON says why a JSON line of no format observe reads is an access-log line it does not
// read, "" when it looks like none (an application's structured log).
func unreadJSON(line []byte) string {
	has := func(k string) bool { return bytes.Contains(line, []byte(`"`+k+`"`)) }
	switch {
	case has("log") && has("stream") && has("time"):
		return whyDocker
	case has("httpRequest") && (has("requestMethod") || has("status")):
		return whyGCPLB
	case (has("status") || has("status_code") || has("response_code")) &&
		(has("request") || has("request_uri") || has("uri") || has("path") || has("method") || has("request_method") || has("upstream_addr")):
		return whyJSON
	}
	return ""
}

// cutField splits at the first blank.
func cutField(b []byte) (field, rest []byte) {
	b = bytes.TrimLeft(b, " ")
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+1:]
}

// hostPort says whether b is "address:port".
func hostPort(b []byte) bool {
	i := bytes.LastIndexByte(b, ':')
	if i <= 0 || i == len(b)-1 {
		return false
	}
	for _, c := range b[i+1:] {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// clfTime says whether b is the Common Log Format's time, dd/Mon/yyyy:hh:mm:ss, followed by
// milliseconds (HAProxy: ".655") or a zone (nginx: " +0000").
func clfTime(b []byte, millis bool) bool {
	if len(b) < 20 || b[2] != '/' || b[6] != '/' || b[11] != ':' || b[14] != ':' || b[17] != ':' {
		return false
	}
	for _, i := range [...]int{0, 1, 7, 8, 9, 10, 12, 13, 15, 16, 18, 19} {
		if !isDigit(b[i]) {
			return false
		}
	}
	tail := b[20:]
	if millis {
		return len(tail) == 4 && tail[0] == '.' && isDigit(tail[1]) && isDigit(tail[2]) && isDigit(tail[3])
	}
	return len(tail) == 6 && tail[0] == ' ' && (tail[1] == '+' || tail[1] == '-')
}
