package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/observe"
)

// pgServer is a PostgreSQL server the test started: Debian's binaries, a cluster in a
// temporary directory, listening on a unix socket only, stopped by PID.
type pgServer struct {
	bin, sock string
	port      int
}

func (s *pgServer) dsn() string {
	return fmt.Sprintf("host=%s port=%d user=retrycap dbname=postgres", s.sock, s.port)
}

// psql runs the real client with args, stdin in; its output with the time zone UTC.
func (s *pgServer) psql(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "psql"), append([]string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", s.sock,
		"-p", strconv.Itoa(s.port), "-U", "retrycap", "-d", "postgres"}, args...)...)
	cmd.Env = append(os.Environ(), "PGTZ=UTC")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("psql %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

func startPostgres(t *testing.T) *pgServer {
	t.Helper()
	out, err := exec.Command("bash", "../../hack/postgres-bin.sh").Output()
	if err != nil {
		t.Fatalf("hack/postgres-bin.sh: %v", err)
	}
	s := &pgServer{bin: strings.TrimSpace(string(out)), port: 5433}
	dir, err := os.MkdirTemp("", "retrycap-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s.sock = dir
	// initdb and postgres refuse to run as root: as root, run them as Debian's postgres user.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	run := func(name string, args ...string) *exec.Cmd {
		c := exec.Command(filepath.Join(s.bin, name), args...)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		c.Dir = dir
		return c
	}
	data := filepath.Join(dir, "data")
	if out, err := run("initdb", "-D", data, "-U", "retrycap", "--auth=trust", "--locale=C", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	srv := run("postgres", "-D", data, "-k", dir, "-p", strconv.Itoa(s.port), "-c", "listen_addresses=", "-F")
	var logb bytes.Buffer
	srv.Stdout, srv.Stderr = &logb, &logb
	if err := srv.Start(); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	pid := srv.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGINT) // fast shutdown
		_ = srv.Wait()
	})
	// Ready when pg_isready says so (polled; the server's own log says why not).
	deadline := time.Now().Add(60 * time.Second)
	for {
		if exec.Command(filepath.Join(s.bin, "pg_isready"), "-q", "-h", dir, "-p", strconv.Itoa(s.port)).Run() == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres (pid %d) not ready after 60 s:\n%s", pid, logb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func runCLI(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := execute(args, strings.NewReader(""), &stdout, &stderr); code != ExitOK {
		t.Fatalf("%v: exit %d\n%s", args, code, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// The gateway and mixed logs loaded into a real PostgreSQL with the documented loader
// (observe -o csv | psql \copy): the query observe -o sql prints, run by psql, and
// observe --postgres give exactly the file run's answer, every key listed and the summary.
func TestObservePostgresMatchesFileRun(t *testing.T) {
	s := startPostgres(t)
	// cut.log: answers whose body was cut after the head (failures whatever their status: the
	// table's cut column), and a line with a cut the proxy never writes (bad).
	logs := []string{"-f", "../observe/testdata/gateway", "-f", "../observe/testdata/mixed", "-f", "../observe/testdata/cut.log"}

	csvOut, csvErr := runCLI(t, append([]string{"observe", "-o", "csv"}, logs...)...)
	if want := "observe: 308 lines read: 296 attempts, 7 skipped, 5 bad, 0 over the line limit (the first bad: ../observe/testdata/gateway/checkout.log: line 41: envoy text line: 12 fields, want exactly 13 (Envoy's default format) or 22 (Istio's))\n"; csvErr != want {
		t.Fatalf("csv stderr %q, want %q", csvErr, want)
	}
	csvPath := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(csvPath, []byte(csvOut), 0o644); err != nil {
		t.Fatal(err)
	}
	s.psql(t, observe.CreateTable(observe.Postgres, "access_log"))
	s.psql(t, "", "-c", `\copy access_log FROM '`+csvPath+`' CSV HEADER`)
	if got := strings.TrimSpace(s.psql(t, "", "-A", "-t", "-c", "SELECT count(*) FROM access_log")); got != "296" {
		t.Fatalf("%s rows loaded, want 296", got)
	}

	matchFileRun(t, s, logs, "access_log", 296, [][]string{{"--threshold", "0", "--top", "0"}, {}, {"--threshold", "7", "--top", "3"}})
}

// matchFileRun checks that --postgres over table (rows attempts) and -o sql's query through
// psql print the file run's table over logs, byte for byte, for each selection.
func matchFileRun(t *testing.T, s *pgServer, logs []string, table string, rows int, sels [][]string) {
	t.Helper()
	for _, sel := range sels {
		fileRun, _ := runCLI(t, append(append([]string{"observe"}, logs...), sel...)...)

		// observe --postgres
		pgRun, pgErr := runCLI(t, append([]string{"observe", "--postgres", s.dsn(), "--table", table}, sel...)...)
		t.Logf("%v: file run, %d lines:\n%s", sel, strings.Count(fileRun, "\n"), fileRun)
		if pgRun != fileRun {
			t.Errorf("%v: --postgres:\n%s\nfile run:\n%s", sel, pgRun, fileRun)
		}
		if want := fmt.Sprintf("observe: %d rows read from %s (the table's attempts)\n", rows, table); pgErr != want {
			t.Errorf("--postgres stderr %q", pgErr)
		}

		// the printed query, through psql
		sql, _ := runCLI(t, append([]string{"observe", "-o", "sql", "--table", table}, sel...)...)
		out := s.psql(t, sql, "-A", "-t", "-F", "|")
		threshold := 5
		if len(sel) > 1 {
			threshold, _ = strconv.Atoi(sel[1])
		}
		rep := reportFromPSQL(t, out, threshold)
		var tab bytes.Buffer
		if err := rep.WriteTable(&tab); err != nil {
			t.Fatal(err)
		}
		if tab.String() != fileRun {
			t.Errorf("%v: printed query through psql:\n%s\nfile run:\n%s", sel, tab.String(), fileRun)
		}
	}
}

// reportFromPSQL reads psql's unaligned rows of the two statements -o sql prints: the key rows
// (12 fields), then the summary row (10).
func reportFromPSQL(t *testing.T, out string, threshold int) *observe.Report {
	t.Helper()
	var rows []observe.KeyRow
	var sum observe.SummaryRow
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("psql field %q: %v", s, err)
		}
		return n
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		switch len(f) {
		case 12:
			first, err := time.Parse("2006-01-02 15:04:05.999999-07", f[5])
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, observe.KeyRow{Key: f[0], Kind: int(num(f[1])), Attempts: num(f[2]), ChainLinks: num(f[3]),
				Failures: num(f[4]), First: first, SpanUS: num(f[6]), Services: f[7], Deepest: f[8], Amplification: num(f[9]),
				Callers: str(f[10]), Methods: str(f[11])})
		case 10:
			sum = observe.SummaryRow{AttemptsRead: num(f[0]), Keyless: num(f[1]), Keys: num(f[2]), Over: num(f[3]), Peak: num(f[4]),
				PeakKey: str(f[5]), PeakAmplification: num(f[6]), PeakAt: str(f[7]), LongestSpanUS: num(f[8]), LongestKey: str(f[9])}
		default:
			t.Fatalf("psql line with %d fields: %q", len(f), line)
		}
	}
	r, err := observe.StoreReport(rows, sum, threshold)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
