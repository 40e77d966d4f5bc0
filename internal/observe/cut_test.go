package observe

import (
	"bytes"
	"strings"
	"testing"
)

// cutLine is a retrycap line of key k to payment with this status, grpc-status (-1: none) and
// cut fields.
func cutLine(k string, status int, extra string) string {
	return `{"log":"retrycap-access","time":"2026-12-03T02:00:00.000000Z","service":"order","upstream":"payment","method":"GET","attempt":1,"status":` +
		itoa(int64(status)) + `,"duration_us":400,"idempotency_key":"` + k + `"` + extra + `}`
}

// TestCutIsAFailure: an answer whose streamed body was cut after its head ("cut", retrycap's
// access log) is a failed attempt whatever its status (before: a cut 200 counted as a success,
// as the whole 200 beside it), and it keeps who cut it and the body bytes; a whole answer
// (no cut) of the same status is not; a gRPC answer whose stream ended with its trailers is
// judged by its grpc-status alone.
func TestCutIsAFailure(t *testing.T) {
	lines := []string{
		cutLine("whole", 200, ""),
		cutLine("up", 200, `,"cut":"upstream","body_bytes":50000`),
		cutLine("up", 200, ""), // the retry a client made after the cut: whole
		cutLine("client", 200, `,"cut":"client","body_bytes":0`),
		cutLine("proxy", 206, `,"cut":"proxy","body_bytes":65536`),
		cutLine("grpc-ok", 200, `,"grpc_status":0`),
		cutLine("grpc-cut", 200, `,"grpc_status":0,"cut":"upstream","body_bytes":17`),
		cutLine("grpc-notfound", 200, `,"grpc_status":5`),
		cutLine("err503", 503, ""),
		cutLine("null", 200, `,"cut":null,"body_bytes":null`), // null is absent (as for every field)
	}
	g := NewGrouper()
	st, err := g.Consume(strings.NewReader(strings.Join(lines, "\n")+"\n"), Source{Name: "cut.log"}, DefaultMaxLine)
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Lines: 10, Attempts: 10}) {
		t.Fatalf("stats %+v", st)
	}
	for k, want := range map[string][2]int{
		"whole": {1, 0}, "up": {2, 1}, "client": {1, 1}, "proxy": {1, 1}, "grpc-ok": {1, 0},
		"grpc-cut": {1, 1}, "grpc-notfound": {1, 0}, "err503": {1, 1}, "null": {1, 0},
	} {
		kr, ok := g.Key(k)
		if !ok || kr.Attempts != want[0] || kr.Failures != want[1] || len(kr.Services) != 1 || kr.Services[0].Failures != want[1] {
			t.Errorf("key %s: %v attempts %d failures %d services %+v, want %d attempts, %d failures", k, ok, kr.Attempts, kr.Failures, kr.Services, want[0], want[1])
		}
	}
	if r := g.Report(0, 0); r.Keys != 9 || r.Stats.Attempts != 10 {
		t.Errorf("report: %d keys, %d attempts", r.Keys, r.Stats.Attempts)
	}

	// One line at a time: the fields as read, and Attempt.Failed.
	for _, tc := range []struct {
		line   string
		cut    string
		body   int64
		failed bool
	}{
		{lines[0], "", 0, false},
		{lines[1], CutUpstream, 50000, true},
		{lines[3], CutClient, 0, true},
		{lines[4], CutProxy, 65536, true},
		{lines[6], CutUpstream, 17, true},
		{lines[7], "", 0, false},
		{lines[9], "", 0, false},
	} {
		a, ok, err := ParseLine([]byte(tc.line), Source{})
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", tc.line, ok, err)
		}
		if a.Cut != tc.cut || a.BodyBytes != tc.body || a.Failed() != tc.failed {
			t.Errorf("%s: cut %q body %d failed %v, want %q %d %v", tc.line, a.Cut, a.BodyBytes, a.Failed(), tc.cut, tc.body, tc.failed)
		}
	}
	// Grouper.Add (attempts made by hand) counts a cut the same.
	h := NewGrouper()
	h.Add(Attempt{Direction: Outbound, Target: "payment", Status: 200, GRPCStatus: -1, IdemKey: "k", Cut: CutClient, BodyBytes: 3})
	h.Add(Attempt{Direction: Outbound, Target: "payment", Status: 200, GRPCStatus: -1, IdemKey: "k"})
	if kr, _ := h.Key("k"); kr.Attempts != 2 || kr.Failures != 1 {
		t.Errorf("Add: attempts %d failures %d, want 2 and 1", kr.Attempts, kr.Failures)
	}

	// A "cut" key on an Istio JSON line is no field of that format: not read, not a failure.
	istio := `{"start_time":"2026-12-03T02:00:00.000Z","method":"GET","path":"/x","response_code":200,"response_flags":"-","duration":3,"request_id":"r1","authority":"payment","upstream_cluster":"outbound|80||payment.shop.svc.cluster.local","requested_server_name":null,"cut":"sideways"}`
	a, ok, err := ParseLine([]byte(istio), Source{})
	if err != nil || !ok || a.Cut != "" || a.Failed() {
		t.Errorf("istio line with a cut key: %+v %v %v", a, ok, err)
	}
}

// The loader's rows carry the cut (the table's last column), and the store's queries count a
// row with one as a failure, as the file run does.
func TestCutInTheTable(t *testing.T) {
	var b bytes.Buffer
	w := NewCSVWriter(&b)
	in := cutLine("up", 200, `,"cut":"upstream","body_bytes":50000`) + "\n" + cutLine("up", 200, "") + "\n"
	if _, err := w.Consume(strings.NewReader(in), Source{Name: "cut.log"}, DefaultMaxLine); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "start_time,duration_us,direction,caller,service,method,authority,path,status,grpc_status,flags,error,trace_id,idempotency_key,request_id,storm_op,cut\n" +
		"2026-12-03T02:00:00.000000Z,400,outbound,order,payment,GET,,,200,,,,,up,,,upstream\n" +
		"2026-12-03T02:00:00.000000Z,400,outbound,order,payment,GET,,,200,,,,,up,,,\n"
	if b.String() != want {
		t.Errorf("csv:\n%s\nwant:\n%s", b.String(), want)
	}
	for d, clause := range map[Dialect]string{Postgres: "OR COALESCE(cut, '') <> '') AS failed", ClickHouse: "OR cut != '') AS failed"} {
		for _, q := range []func() (string, error){
			func() (string, error) { return ListQuery(d, "access_log", 5, 10) },
			func() (string, error) { return SummaryQuery(d, "access_log", 5) },
		} {
			if s, err := q(); err != nil || !strings.Contains(s, clause) {
				t.Errorf("%s query (%v) has no %q:\n%s", d, err, clause, s)
			}
		}
		if ddl := CreateTable(d, "access_log"); !strings.Contains(ddl, "  cut ") {
			t.Errorf("%s table has no cut column:\n%s", d, ddl)
		}
	}
}
