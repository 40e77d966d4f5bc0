package cli

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/observe"
)

// hostileDay writes logs of shapes a day at a gateway brings (none written by the proxy's own
// tests), each with its exact number of attempts, and returns the paths and the attempts:
//   - a key sent with a new trace id per request (40 chain links: the set past 16),
//   - a chain of 20 services under one key, first reached in call order (the services' set),
//   - 70 distinct methods (the 64th and later past the bit word), over two keys,
//   - CRLF line ends, a copytruncate hole of NULs, CRI and kubectl --prefix shapes, gzip'd
//     members joined, "-" in every field Envoy may leave empty.
func hostileDay(t *testing.T) (paths []string, attempts int) {
	t.Helper()
	dir := t.TempDir()
	line := func(ts int, svc, up, method, trace, key string, status int) string {
		tr := ""
		if trace != "" {
			tr = fmt.Sprintf(`,"trace_id":%q`, trace)
		}
		return fmt.Sprintf(`{"log":"retrycap-access","time":"2026-12-01T10:%02d:%02d.%06dZ","service":%q,"upstream":%q,"method":%q,"authority":"%s:8080","path":"/x","attempt":1,"status":%d,"duration_us":1500%s,"idempotency_key":%q}`,
			ts/3600%60, ts/60%60, ts%60*1000, svc, up, method, up, status, tr, key)
	}
	var b strings.Builder
	for i := range 40 {
		for r := range 2 {
			fmt.Fprintf(&b, "%s\r\n", line(i*2+r, "web", "order", "POST", fmt.Sprintf("%032x", i+1), "hot", 503))
			attempts++
		}
	}
	prev := "web"
	for i := range 20 {
		svc := fmt.Sprintf("s%02d", i)
		for r := range i + 1 { // deeper, more attempts
			fmt.Fprintf(&b, "%s\n", line(100+i*30+r, prev, svc, "GET", "", "deep", 502))
			attempts++
		}
		prev = svc
	}
	for i := range 70 {
		key := "meth-a"
		if i >= 64 {
			key = "meth-b"
		}
		fmt.Fprintf(&b, "%s\n", line(1000+i, "web", "order", fmt.Sprintf("M%02d", i), "", key, 200))
		attempts++
	}
	b.WriteString(strings.Repeat("\x00", 4096)) // a copytruncate hole before the next line
	fmt.Fprintf(&b, "%s\n", line(2000, "web", "order", "GET", "", "after-hole", 200))
	attempts++
	writeFile(t, filepath.Join(dir, "proxy.log"), b.String())

	// Istio's text format in a CRI file and as kubectl logs --prefix --timestamps prints it;
	// "-" in every field Envoy may leave empty (no upstream host, no SNI, no route).
	istio := func(ts int, rid, cluster string, code int) string {
		return fmt.Sprintf(`[2026-12-01T11:00:%02d.000Z] "GET /p HTTP/1.1" %d UF upstream_reset_before_response_started{connection_failure} - "-" 0 91 %d - "-" "-" %q "shop.example.com" "-" %s - 10.44.1.23:8080 10.44.0.1:51910 - -`,
			ts, code, 10+ts, rid, cluster)
	}
	var c strings.Builder
	for i := range 6 {
		fmt.Fprintf(&c, "2026-12-01T11:00:%02d.123456789Z stdout F %s\n", i, istio(i, "rid-cri", "outbound|8080||checkout.shop.svc.cluster.local", 503))
		attempts++
	}
	writeFile(t, filepath.Join(dir, "0.log"), c.String())
	var k strings.Builder
	for i := range 7 {
		fmt.Fprintf(&k, "[pod/gw-1/istio-proxy] 2026-12-01T11:01:%02d.000000123Z %s\n", i, istio(i, "rid-prefix", "-", 503))
		attempts++
	}
	// joined gzip members (rotations concatenated with cat)
	z := gzBytes(t, k.String()[:strings.Index(k.String(), "\n")+1])
	z = append(z, gzBytes(t, k.String()[strings.Index(k.String(), "\n")+1:])...)
	writeFile(t, filepath.Join(dir, "gw.log.1.gz"), string(z))
	return []string{"-f", dir}, attempts
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestObservePostgresHostileMatchesFileRun: the SQL observe prints, and --postgres, give the
// file run's report over hostileDay's logs byte for byte, and the rows -o csv writes load with
// psql's \copy: the same aggregates from the store as from the files on the shapes the
// aggregation treats apart (a key's trace ids, services and methods past their lists).
func TestObservePostgresHostileMatchesFileRun(t *testing.T) {
	s := startPostgres(t)
	logs, attempts := hostileDay(t)
	csvOut, csvErr := runCLI(t, append([]string{"observe", "-o", "csv"}, logs...)...)
	if want := fmt.Sprintf("observe: %d lines read: %d attempts, 0 skipped, 0 bad, 0 over the line limit\n", attempts, attempts); csvErr != want {
		t.Fatalf("csv stderr %q, want %q", csvErr, want)
	}
	csvPath := filepath.Join(t.TempDir(), "rows.csv")
	writeFile(t, csvPath, csvOut)
	s.psql(t, observe.CreateTable(observe.Postgres, "hostile"))
	s.psql(t, "", "-c", `\copy hostile FROM '`+csvPath+`' CSV HEADER`)
	if got := strings.TrimSpace(s.psql(t, "", "-A", "-t", "-c", "SELECT count(*) FROM hostile")); got != fmt.Sprint(attempts) {
		t.Fatalf("%s rows loaded, want %d", got, attempts)
	}
	matchFileRun(t, s, logs, "hostile", attempts, [][]string{{"--threshold", "0", "--top", "0"}, {"--threshold", "6", "--top", "2"}})
	// What the file run says of the shapes, exactly.
	out, _ := runCLI(t, append([]string{"observe", "--threshold", "0", "--top", "0", "-o", "json"}, logs...)...)
	for _, want := range []string{`"key": "hot",`, `"chain_links": 40,`, `"deepest": "s19",`, `"amplification": 20,`, `"method": "M64,M65,M66,M67,M68,M69"`, `"key": "after-hole",`} {
		if !strings.Contains(out, want) {
			t.Errorf("the file run's JSON lacks %s:\n%s", want, out)
		}
	}
}

func gzBytes(t *testing.T, s string) []byte {
	t.Helper()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// TestObservePostgresLoadsHostileBytes: keys and names with bytes PostgreSQL's text refuses (an
// Idempotency-Key that is not UTF-8, a JSON-escaped NUL in a key, a raw NUL in a service name)
// are written by -o csv Go-quoted, so the day's \copy loads (before: psql failed the whole load,
// "invalid byte sequence for encoding UTF8"), and the store's report is the file run's.
func TestObservePostgresLoadsHostileBytes(t *testing.T) {
	s := startPostgres(t)
	dir := t.TempDir()
	l := func(svc, key string) string {
		return `{"log":"retrycap-access","time":"2026-12-01T11:38:39.490502Z","service":"web","upstream":"` + svc + `","method":"GET","attempt":1,"status":503,"duration_us":10,"idempotency_key":"` + key + `"}` + "\n"
	}
	var b strings.Builder
	for range 6 {
		b.WriteString(l("order", "k\xff\xfe"))
		b.WriteString(l("order", `k\u0000nul`))
		b.WriteString(l("or\x00der", "raw-nul-service"))
		b.WriteString(l("order", "plain"))
	}
	writeFile(t, filepath.Join(dir, "bytes.log"), b.String())
	logs := []string{"-f", dir}
	csvOut, _ := runCLI(t, append([]string{"observe", "-o", "csv"}, logs...)...)
	if !strings.Contains(csvOut, `"""k\xff\xfe"""`) || !strings.Contains(csvOut, `"""k\x00nul"""`) || !strings.Contains(csvOut, `"""or\x00der"""`) {
		t.Fatalf("csv:\n%s", csvOut)
	}
	csvPath := filepath.Join(t.TempDir(), "rows.csv")
	writeFile(t, csvPath, csvOut)
	s.psql(t, observe.CreateTable(observe.Postgres, "bytes"))
	s.psql(t, "", "-c", `\copy bytes FROM '`+csvPath+`' CSV HEADER`)
	matchFileRun(t, s, logs, "bytes", 24, [][]string{{"--threshold", "0", "--top", "0"}})
}
