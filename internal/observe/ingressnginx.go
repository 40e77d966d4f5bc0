package observe

import (
	"bytes"
	"fmt"
	"time"
)

// ingress-nginx's default access log (its log-format-upstream, logFormatUpstream in
// kubernetes/ingress-nginx internal/ingress/controller/config/config.go):
//
//	$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer"
//	"$http_user_agent" $request_length $request_time [$proxy_upstream_name]
//	[$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length
//	$upstream_response_time $upstream_status $req_id
//
// One line is one client request. nginx's own retries (proxy_next_upstream) are the entries of
// the four upstream lists, separated by ", " (and " : " where the request moved to another
// upstream group): the line is read as one attempt per entry, each with its own status and
// time, keyed by $req_id (the client's X-Request-ID, else nginx's $request_id) and named by
// $proxy_upstream_name (<namespace>-<service>-<port>, kept whole: a namespace may hold dashes).

// whyNoUpstream: the request reached no upstream (nginx answered it itself).
const whyNoUpstream = `an ingress-nginx line with no upstream ($upstream_addr "-"): nginx answered the request itself ` +
	`(a redirect, a rate limit, a denied auth, no matching rule), no attempt reached a service`

// nginxLine is what an ingress-nginx line's attempts are folded from (sub-slices of the line).
type nginxLine struct {
	times, statuses []byte // $upstream_response_time, $upstream_status: one entry per try
	start           int64  // the request's start, Unix ns ($time_local - $request_time)
}

// parseIngressNginx reads a line of ingress-nginx's default format into p.r (its first try) and
// p.ng. ok is false when the line is not one (a plain combined line, any other text): it then
// goes to unreadText. A line that has the combined fields and then "$request_length
// $request_time [" is ingress-nginx's, and any fault after that makes it bad, naming the field.
func (p *parser) parseIngressNginx(line []byte) (k lineKind, ok bool, err error) {
	s := line
	addr, s := cutField(s)
	dash, s := cutField(s)
	_, s = cutField(s) // $remote_user
	if len(addr) == 0 || string(dash) != "-" || len(s) == 0 || s[0] != '[' {
		return lineSkipped, false, nil
	}
	end := bytes.IndexByte(s, ']')
	if end < 0 || !clfTime(s[1:end], false) {
		return lineSkipped, false, nil
	}
	timeLocal := s[1:end]
	s = s[end+1:]
	request, s, ok1 := quotedField(s)
	status, s := cutField(s)
	_, s = cutField(s) // $body_bytes_sent
	_, s, ok2 := quotedField(s)
	_, s, ok3 := quotedField(s)
	if !ok1 || !ok2 || !ok3 {
		return lineSkipped, false, nil
	}
	reqLen, s := cutField(s)
	reqTime, s := cutField(s)
	s = bytes.TrimLeft(s, " ")
	if _, isNum := atoi(reqLen); !isNum || len(reqTime) == 0 || !isDigit(reqTime[0]) || len(s) == 0 || s[0] != '[' {
		return lineSkipped, false, nil // combined, or combined with other fields after it
	}
	bad := func(format string, a ...any) (lineKind, bool, error) {
		return lineBad, true, fmt.Errorf("ingress-nginx line: "+format, a...)
	}
	r := &p.r
	r.format, r.dir = FormatIngressNginx, Outbound
	t, tok := clfUnix(timeLocal)
	if !tok {
		return bad("$time_local %q: want dd/Mon/yyyy:hh:mm:ss +zzzz from 1970 to 2200", timeLocal)
	}
	if _, sok := atoi(status); !sok {
		return bad("$status %q is not a number", status)
	}
	total, dok := nginxSeconds(reqTime)
	if !dok {
		return bad("$request_time %q: want seconds (0.012)", reqTime)
	}
	name, s, err := bracketField(s, "$proxy_upstream_name")
	if err != nil {
		return bad("%v", err)
	}
	_, s, err = bracketField(s, "$proxy_alternative_upstream_name")
	if err != nil {
		return bad("%v", err)
	}
	var lists [4][]byte
	for i, f := range nginxListNames {
		lists[i], s, err = nginxList(s, f)
		if err != nil {
			return bad("%v", err)
		}
	}
	reqID := bytes.TrimSpace(s)
	if len(reqID) == 0 {
		return bad("no $req_id after $upstream_status (truncated line?)")
	}
	if string(lists[0]) == "-" {
		p.unread = whyNoUpstream
		return lineUnread, true, nil
	}
	// Every list has one entry per try, each of its field's kind.
	var n [4]int
	var upstreamTime int64
	for i, l := range lists {
		for rest := l; len(rest) > 0; {
			var e []byte
			e, rest = nextEntry(rest)
			if !nginxEntryOK(i, e) {
				return bad("%s entry %q: want %s", nginxListNames[i], e, nginxListWant[i])
			}
			if i == 2 {
				d, _ := nginxSeconds(e)
				if upstreamTime += d; upstreamTime > maxDuration {
					return bad("%s %q: over 10 years in all", nginxListNames[i], l)
				}
			}
			n[i]++
		}
	}
	for i := 1; i < 4; i++ {
		if n[i] != n[0] {
			return bad("%s lists %d entries, $upstream_addr %d (one per upstream try: the lists must agree): %q, %q",
				nginxListNames[i], n[i], n[0], lists[i], lists[0])
		}
	}
	m, rest, _ := bytes.Cut(request, []byte(" "))
	path, _, _ := bytes.Cut(rest, []byte(" "))
	r.method, r.path = dashB(m), stripQueryB(dashB(path))
	r.caller, r.target, r.rid = []byte(p.src.Service), dashB(name), dashB(reqID)
	p.ng = nginxLine{times: lists[2], statuses: lists[3], start: t - total}
	p.nginxTry(1, p.ng.start, lists[2], lists[3])
	return lineAttempt, true, nil
}

// The four upstream lists, in the format's order, and what each entry must be.
var (
	nginxListNames = [4]string{"$upstream_addr", "$upstream_response_length", "$upstream_response_time", "$upstream_status"}
	nginxListWant  = [4]string{"an address or a group name", `a number or "-"`, `seconds (0.004) or "-"`, `an HTTP status or "-"`}
)

func nginxEntryOK(list int, e []byte) bool {
	if len(e) == 0 {
		return false
	}
	if string(e) == "-" {
		return list != 0
	}
	switch list {
	case 1:
		_, ok := atoi(e)
		return ok
	case 2:
		_, ok := nginxSeconds(e)
		return ok
	case 3:
		n, ok := atoi(e)
		return ok && n >= 100 && n <= 999
	}
	return true
}

// nginxTry sets p.r to try number of the line, started at start, from the lists' first entries,
// and returns the lists' remainders and the try's end.
func (p *parser) nginxTry(number int, start int64, times, statuses []byte) (restTimes, restStatuses []byte, end int64) {
	t, restTimes := nextEntry(times)
	s, restStatuses := nextEntry(statuses)
	d, _ := nginxSeconds(t) // "-": 0 (checked when the line was parsed)
	st, _ := atoi(s)        // "-": no response, 0
	r := &p.r
	r.number, r.start, r.dur, r.status = number, start, d, int(st)
	return restTimes, restStatuses, start + d
}

// emit folds the line's attempts: the one attempt of a line, or each try an ingress-nginx line
// lists, one after the other from the request's start. It returns how many it folded.
func (p *parser) emit(fold func(*rec) bool) (int, bool) {
	if p.r.format != FormatIngressNginx {
		if !fold(&p.r) {
			return 0, false
		}
		return 1, true
	}
	times, statuses, start := p.ng.times, p.ng.statuses, p.ng.start
	n := 0
	for len(statuses) > 0 {
		n++
		times, statuses, start = p.nginxTry(n, start, times, statuses)
		if !fold(&p.r) {
			return n - 1, false // a line's tries share its key: only its first can meet the bound
		}
	}
	return n, true
}

// nginxList reads one of the upstream lists at the start of s: entries separated by ", " or
// " : ", ending at a lone blank.
func nginxList(s []byte, field string) (list, rest []byte, err error) {
	s = bytes.TrimLeft(s, " ")
	if len(s) == 0 {
		return nil, nil, fmt.Errorf("no %s (truncated line?)", field)
	}
	i := 0
	for {
		for i < len(s) && s[i] != ' ' && s[i] != ',' {
			i++
		}
		j := 0
		switch {
		case i < len(s) && s[i] == ',' && i+1 < len(s) && s[i+1] != ' ':
			return nil, nil, fmt.Errorf("%s %q: a \",\" without the blank nginx writes after it", field, s[:i+2])
		case i < len(s) && s[i] == ',':
			j = i + 2
		case bytes.HasPrefix(s[i:], []byte(" : ")):
			j = i + 3
		default:
			return s[:i], s[i:], nil
		}
		if j >= len(s) || s[j] == ' ' || s[j] == ',' {
			return nil, nil, fmt.Errorf("%s %q ends in a separator (truncated line?)", field, s[:min(j, len(s))])
		}
		i = j
	}
}

// nextEntry cuts a checked list's first entry.
func nextEntry(l []byte) (entry, rest []byte) {
	i := bytes.IndexAny(l, " ,")
	if i < 0 {
		return l, nil
	}
	rest = l[i:]
	if bytes.HasPrefix(rest, []byte(" : ")) {
		return l[:i], rest[3:]
	}
	return l[:i], rest[2:]
}

// bracketField reads "[VALUE]" at the start of s.
func bracketField(s []byte, field string) (v, rest []byte, err error) {
	s = bytes.TrimLeft(s, " ")
	if len(s) == 0 || s[0] != '[' {
		return nil, nil, fmt.Errorf("no [%s] (truncated line?)", field)
	}
	end := bytes.IndexByte(s, ']')
	if end < 0 {
		return nil, nil, fmt.Errorf("[%s without its \"]\" (truncated line?)", field)
	}
	return s[1:end], s[end+1:], nil
}

// quotedField reads "VALUE" at the start of s (nginx writes a quote inside as \x22).
func quotedField(s []byte) (v, rest []byte, ok bool) {
	s = bytes.TrimLeft(s, " ")
	if len(s) == 0 || s[0] != '"' {
		return nil, nil, false
	}
	end := bytes.IndexByte(s[1:], '"')
	if end < 0 {
		return nil, nil, false
	}
	return s[1 : 1+end], s[end+2:], true
}

// nginxSeconds reads nginx's seconds with milliseconds ("0.012") as nanoseconds; "-" is 0.
func nginxSeconds(b []byte) (int64, bool) {
	if string(b) == "-" {
		return 0, true
	}
	whole, frac, hasFrac := bytes.Cut(b, []byte("."))
	secs, ok := atoi(whole)
	if !ok || secs > maxDuration/int64(time.Second) || (hasFrac && (len(frac) == 0 || len(frac) > 9)) {
		return 0, false
	}
	ns := int64(0)
	if hasFrac {
		f, ok := atoi(frac)
		if !ok {
			return 0, false
		}
		ns = f
		for range 9 - len(frac) {
			ns *= 10
		}
	}
	return secs*int64(time.Second) + ns, true
}

var months = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// clfUnix reads nginx's $time_local, "24/Nov/2026:14:02:11 +0000" (clfTime checked its shape),
// as Unix nanoseconds.
func clfUnix(b []byte) (int64, bool) {
	num := func(s []byte) int {
		n := 0
		for _, c := range s {
			n = n*10 + int(c-'0')
		}
		return n
	}
	mo := 0
	for i, m := range months {
		if string(b[3:6]) == m {
			mo = i + 1
		}
	}
	d, y, h, mi, s := num(b[0:2]), num(b[7:11]), num(b[12:14]), num(b[15:17]), num(b[18:20])
	zone := b[22:26]
	for _, c := range zone {
		if !isDigit(c) {
			return 0, false
		}
	}
	if mo == 0 || y < 1970 || y > 2200 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 {
		return 0, false
	}
	off := int64(num(zone[0:2])*3600 + num(zone[2:4])*60)
	if b[21] == '-' {
		off = -off
	}
	secs := daysFromCivil(y, mo, d)*86400 + int64(h*3600+mi*60+s) - off
	return secs * int64(time.Second), true
}
