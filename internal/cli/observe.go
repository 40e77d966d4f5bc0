package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/observe"
	"github.com/retrycap/retrycap/internal/observe/pgstore"
	"github.com/retrycap/retrycap/internal/sidecar"
	"github.com/retrycap/retrycap/internal/workload"
)

// ProxyContainerName is the injected sidecar's container name, observe's default -c.
const ProxyContainerName = "retrycap-proxy"

// NewObserveCmd returns `observe`: what really happened, per request, from access logs.
func NewObserveCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var (
		files                                           []string
		fromCluster, allNamespaces                      bool
		selector, container, kubeconfig, kubeCtx, ns, o string
		dialect, table, pgDSN, logqlSelector            string
		since                                           time.Duration
		threshold, top, maxLine, maxKeys                int
	)
	cmd := &cobra.Command{
		Use:   "observe [-f LOGS]... [--from-cluster -l SELECTOR] [--postgres DSN --table T]",
		Short: "Per request, what really happened: attempts, chain links, services, span, failures and the observed amplification, from access logs",
		Long: `observe reads access logs and groups the attempts per key (Idempotency-Key, else the
traceparent trace id, else the request id: X-Request-Id, or the storm lab's storm-op): the attempts,
the chain links (distinct trace ids), the services that took part, the first attempt, the span,
the failures and the observed amplification (the attempts at the deepest service the key reached).
It lists the keys with more than --threshold attempts, worst first, and ends with a summary line;
the lines read, skipped, bad and over --max-line go to stderr.

It reads retrycap-proxy's access log (--access-log, JSON lines), Envoy's and Istio's access logs in
their default text and JSON formats and Envoy Gateway's JSON (keyed by x-request-id), as written,
through the kubelet's CRI log files or kubectl logs --timestamps/--prefix, gzip'd when named *.gz,
from files, directories (every file below), stdin ("-", the default without -f and --from-cluster),
or with --from-cluster the logs of container -c of the pods -l selects, through the API server
(pods/log; needs list on pods and get on pods/log); with -c retrycap-proxy only the sidecars
retrycap's injector added (annotation retrycap.dev/injected), the others named on stderr. Memory is
per key, not per line, and bounded: over --max-keys distinct keys (trace ids, service names) the
run stops at that line, exit 2, and the rest belongs in a log store (below).

In a log store: -o sql prints the same aggregation as a query over a table of attempts (--dialect
postgres or clickhouse, --table), -o logql what Loki can compute, -o csv the rows to load the
table with; --postgres DSN runs the query in PostgreSQL and prints the answer like a file run.

Access-log lines it recognises and cannot read as HTTP attempts (Envoy's TCP connection lines,
nginx, HAProxy, other JSON access logs, Docker's json-file wrapper, cloud load balancers' logs)
are counted as not read, the first named with why.

Exit status: 0 when at least one attempt with a key was read; 2 on bad input, over --max-keys,
when no line read was an access-log line (nothing to report: the access log is off, or the logs
are not the proxies'), and when no attempt read has a key (nothing grouped, nothing checked).`,
		Example: `  retrycap observe -f /var/log/proxies/
  kubectl logs deploy/order -c retrycap-proxy | retrycap observe
  kubectl logs -n istio-system -l app=istio-ingressgateway --prefix --timestamps | retrycap observe
  retrycap observe /var/log/pods/istio-system_istio-ingressgateway-*/istio-proxy/   # CRI files, *.gz rotations
  kubectl retrycap observe --from-cluster -n shop -l app.kubernetes.io/part-of=shop -c retrycap-proxy --since 40m
  kubectl retrycap observe --from-cluster -n istio-system -l app=istio-ingressgateway -c istio-proxy -o json
  retrycap observe -f gateway.log -o csv | psql -c "\copy access_log FROM STDIN CSV HEADER"
  retrycap observe -o sql --table access_log | psql
  retrycap observe --postgres "host=/run/postgresql dbname=logs" --table access_log`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := func(format string, a ...any) error {
				return &ExitError{Code: ExitBadInput, Msg: "observe: " + fmt.Sprintf(format, a...)}
			}
			switch o {
			case "table", "json", "sql", "logql", "csv":
			default:
				return bad("unknown output %q (table, json, sql, logql, csv)", o)
			}
			files = append(files, args...)
			if fromCluster && len(files) > 0 {
				return bad("--from-cluster reads no files; drop -f and the arguments")
			}
			if err := stdinOnce("observe", "-", files); err != nil {
				return err
			}
			if err := readOnce(files); err != nil {
				return bad("%v", err)
			}
			if !fromCluster && (selector != "" || allNamespaces) {
				return bad("-l and -A need --from-cluster")
			}
			if _, err := labels.Parse(selector); err != nil {
				return bad("-l %q: %v", selector, err) // before the API server answers "listing pods: ..."
			}
			// The pod flags without --from-cluster were passed over: a file read whole when the
			// user asked for its last 40 minutes reads as a report of those minutes.
			for _, name := range []string{"namespace", "container", "since", "kubeconfig", "context"} {
				if f := cmd.Flags().Lookup(name); !fromCluster && f.Changed && (name != "since" || o != "logql") {
					return bad("-%s %s: reads the pods' logs, needs --from-cluster (files and stdin are read whole)", flagName(f), f.Value)
				}
			}
			if allNamespaces && cmd.Flags().Changed("namespace") {
				return bad("-n and -A exclude each other")
			}
			if ns != "" { // "": the context's namespace, as the flag's default
				if err := checkNamespace("observe", ns); err != nil {
					return err
				}
			}
			if container == "" {
				return bad("-c \"\": want a container name (leave the flag out for the default, %s)", ProxyContainerName)
			}
			// An empty DSN was "no --postgres": stdin was read instead of the table.
			if cmd.Flags().Changed("postgres") && pgDSN == "" {
				return bad("--postgres \"\": want a libpq connection string or URL (leave the flag out to read logs)")
			}
			if o == "logql" && (!strings.HasPrefix(logqlSelector, "{") || !strings.HasSuffix(logqlSelector, "}")) {
				return bad("--logql-selector %q: want a LogQL stream selector, {label=\"value\",...}", logqlSelector)
			}
			switch {
			case threshold < 0:
				return bad("--threshold %d: must be >= 0", threshold)
			case top < 0:
				return bad("--top %d: must be >= 0", top)
			case since < 0:
				return bad("--since %s: must be >= 0", since)
			case o == "logql" && since == 0 && cmd.Flags().Changed("since"):
				return bad("--since 0s: -o logql needs a range (leave the flag out for the default, 1h)")
			}
			if maxKeys < 0 {
				return bad("--max-keys %d: must be 0 (no bound) or more", maxKeys)
			}
			if maxLine < 1024 {
				return bad("--max-line %d: must be at least 1024 bytes", maxLine)
			}
			// A line up to --max-line is held whole: the bound is a memory bound.
			if maxLine > maxMaxLine {
				return bad("--max-line %d: must be 1024..%d bytes (1 GiB)", maxLine, maxMaxLine)
			}
			// Flags of the other outputs were passed over: the run read as if they were honoured.
			for _, use := range []struct{ flag, by, what string }{
				{"dialect", "sql", "only -o sql writes a dialect"},
				{"logql-selector", "logql", "only -o logql uses a stream selector"},
				{"table", "sql", "only -o sql and --postgres read a table"},
			} {
				f := cmd.Flags().Lookup(use.flag)
				if f.Changed && o != use.by && (use.flag != "table" || pgDSN == "") {
					return bad("--%s %s: %s", use.flag, f.Value, use.what)
				}
			}
			d := observe.Dialect(dialect)
			if d != observe.Postgres && d != observe.ClickHouse {
				return bad("--dialect %q: want postgres or clickhouse", dialect)
			}
			if err := observe.CheckTable(table); err != nil {
				return bad("--table: %v", err)
			}
			storeRun := pgDSN != ""
			if storeRun && (fromCluster || len(files) > 0) {
				return bad("--postgres reads the table, not logs: drop -f, the arguments and --from-cluster")
			}
			if storeRun && o != "table" && o != "json" {
				return bad("--postgres answers as a file run: -o table or json, not %s", o)
			}
			switch o {
			case "sql":
				if fromCluster || len(files) > 0 {
					return bad("-o sql prints the query for the store and reads no logs: drop -f, the arguments and --from-cluster (load the table with -o csv)")
				}
				return printSQL(stdout, d, table, threshold, top)
			case "logql":
				if fromCluster || len(files) > 0 {
					return bad("-o logql prints the query for Loki and reads no logs: drop -f, the arguments and --from-cluster")
				}
				_, err := io.WriteString(stdout, observe.LogQL(logqlSelector, since, threshold, top))
				return err
			}
			var r *observe.Report
			if storeRun {
				rep, err := pgstore.Run(cmd.Context(), pgDSN, table, threshold, top)
				if err != nil {
					return bad("%v", err)
				}
				r = rep
				fmt.Fprintf(stderr, "observe: %s rows read from %s (the table's attempts)\n", observe.Thousands(r.Stats.Attempts), table)
			} else {
				var sink consumer
				var csvw *observe.CSVWriter
				g := observe.NewGrouper()
				g.SetMaxKeys(maxKeys)
				if o == "csv" {
					csvw = observe.NewCSVWriter(stdout)
					sink = csvw.Consume
				} else {
					sink = g.Consume
				}
				var total observe.Stats
				// A stream that breaks (a truncated rotation, a pod's log cut) does not end the
				// run: its lines before the break are counted and folded, the other streams are
				// read, the report is printed, and the run exits 2 naming each break.
				var errs []error
				if fromCluster {
					var err error
					total, errs, err = readCluster(cmd.Context(), sink, maxLine, clusterSource{kubeconfig, kubeCtx, ns, allNamespaces, selector, container, since}, stderr)
					if err != nil {
						fmt.Fprintf(stderr, "observe: %s\n", total)
						return bad("%v", err)
					}
				} else {
					if len(files) == 0 {
						// Without -f the logs come on stdin: from a terminal that would wait, without a
						// word, for lines typed by hand.
						if isTerminal(stdin) {
							return bad("no logs given: pipe them in (kubectl logs deploy/NAME -c retrycap-proxy | %s), or name them with -f LOGS, or read the pods' with --from-cluster -l SELECTOR; \"-f -\" reads a terminal's lines", cmd.CommandPath())
						}
						files = []string{"-"}
					}
					for _, f := range files {
						st, ferrs := readPath(sink, maxLine, f, stdin, stderr)
						total.Add(st)
						errs = append(errs, ferrs...)
						if g.Err() != nil {
							break // the run stopped at its bound: the other paths are not opened
						}
					}
				}
				// The counts always go to stderr, whatever the output: a run that read
				// nothing it knew, or skipped lines, says so.
				fmt.Fprintf(stderr, "observe: %s\n", total)
				if err := g.Err(); err != nil {
					// The run stopped at its bound: what it read is a prefix of the logs, no
					// report of them (the other streams were not read, their errors moot).
					return bad("stopped at %v", err)
				}
				broken := func() error {
					if len(errs) == 1 && total.Lines == 0 {
						return bad("%v", errs[0]) // nothing read at all: the error alone says it
					}
					msgs := make([]string, len(errs))
					for i, e := range errs {
						msgs[i] = e.Error()
					}
					return bad("%d stream(s) could not be read to the end (the lines before each break are counted above): %s", len(errs), strings.Join(msgs, "; "))
				}
				if o == "csv" {
					if err := csvw.Flush(); err != nil {
						return bad("%v", err)
					}
					if len(errs) > 0 {
						return broken()
					}
					return nil
				}
				// Nothing read is nothing checked: an empty report with exit 0 reads as "no key
				// retried" in a script, when the access log was off (the policy's default).
				if total.Attempts == 0 {
					if len(errs) > 0 {
						return broken()
					}
					if total.Unread > 0 {
						// Access-log lines it cannot read are named, not taken for no traffic.
						return bad("no HTTP attempt among the %d line(s) read: %d access-log line(s) of a shape observe does not read "+
							"(the first: %s): nothing to report", total.Lines, total.Unread, total.FirstUnread)
					}
					return bad("no access-log line among the %d line(s) read: nothing to report "+
						"(is the access log on? a RetryPolicy's spec.observability.accessLog, retrycap-proxy --access-log; "+
						"or Envoy's or Istio's default formats)", total.Lines)
				}
				if len(errs) > 0 {
					// The attempts read are reported, then the run fails: a partial report
					// must not pass for a whole one in a script.
					rep := g.Report(threshold, top)
					var werr error
					if o == "json" {
						werr = rep.WriteJSON(stdout)
					} else {
						werr = rep.WriteTable(stdout)
					}
					if werr != nil {
						return bad("%v", werr)
					}
					return broken()
				}
				r = g.Report(threshold, top)
			}
			// No key is nothing grouped, so nothing checked: "0 keys with more than N attempts"
			// would read as no amplification when no attempt could be told apart per request.
			if r.Keys == 0 {
				if storeRun {
					return bad("the table %s holds no attempt with a key (%s rows, %s without one): nothing to report", table,
						observe.Thousands(r.Stats.Attempts), observe.Thousands(r.Keyless))
				}
				return bad("%s attempt(s) read, none with a key to group them by (Idempotency-Key, traceparent, "+
					"x-request-id or storm-op): nothing to report", observe.Thousands(r.Stats.Attempts))
			}
			var err error
			if o == "json" {
				err = r.WriteJSON(stdout)
			} else {
				err = r.WriteTable(stdout)
			}
			if err != nil {
				return bad("%v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&files, "file", "f", nil, `log file or directory ("-" for stdin; *.gz read through gzip); repeatable`)
	f.BoolVar(&fromCluster, "from-cluster", false, "read the sidecars' logs from the cluster (pods/log)")
	f.StringVarP(&selector, "selector", "l", "", "--from-cluster: label selector of the pods")
	f.StringVarP(&container, "container", "c", ProxyContainerName, "--from-cluster: the container whose log to read (istio-proxy for Envoy's)")
	f.DurationVar(&since, "since", 0, "--from-cluster: only lines newer than this (e.g. 40m); 0: all. -o logql: the query's range (default 1h)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&kubeCtx, "context", "", "kubeconfig context to use (default: the current context)")
	f.StringVarP(&ns, "namespace", "n", "", "--from-cluster: namespace of the pods (default: the context's)")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "--from-cluster: every namespace")
	f.IntVar(&threshold, "threshold", 5, "list the keys with more attempts than this")
	f.IntVar(&top, "top", 20, "list at most this many keys (0: all); the summary counts them all")
	f.IntVar(&maxLine, "max-line", observe.DefaultMaxLine, "longest line parsed, bytes, 1024 to 1 GiB (held whole: a memory bound); a longer one is counted and skipped")
	f.IntVar(&maxKeys, "max-keys", observe.DefaultMaxKeys, "most distinct keys (and trace ids) held, about 1 GiB per 4,000,000: over it the run stops, exit 2 (0: no bound; -o csv holds none)")
	f.StringVarP(&o, "output", "o", "table", "output: table, json, sql (the query for a log store), logql (for Loki) or csv (the rows to load)")
	f.StringVar(&dialect, "dialect", string(observe.Postgres), "-o sql: postgres or clickhouse")
	f.StringVar(&table, "table", "access_log", "-o sql, --postgres: the table of attempts (the columns -o csv writes)")
	f.StringVar(&pgDSN, "postgres", "", "run the query in this PostgreSQL (a libpq connection string or URL) and print the answer")
	f.StringVar(&logqlSelector, "logql-selector", `{container=~"istio-proxy|retrycap-proxy"}`, "-o logql: the stream selector")
	return cmd
}

// consumer reads one stream of lines (the grouper, or the CSV writer).
type consumer func(r io.Reader, src observe.Source, maxLine int) (observe.Stats, error)

func printSQL(w io.Writer, d observe.Dialect, table string, threshold, top int) error {
	list, err := observe.ListQuery(d, table, threshold, top)
	if err != nil {
		return err
	}
	sum, err := observe.SummaryQuery(d, table, threshold)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "-- retrycap observe as SQL (%s) over %s; the table:\n%s\n-- the keys with more than %d attempts, worst first:\n%s\n-- the summary line:\n%s",
		d, table, commentOut(observe.CreateTable(d, table)), threshold, list, sum)
	return err
}

func commentOut(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		b.WriteString("-- ")
		b.WriteString(l)
		b.WriteString("\n")
	}
	return b.String()
}

// readPath parses a file, every regular file under a directory, or stdin ("-"); a name
// ending in .gz, or stdin starting with gzip's magic, is read through gzip. A file that cannot
// be opened or breaks while read is an error of its own; the other files are still read.
// readPath reads stdin ("-"), a file or a directory (every file below it). A path given by name
// is followed when it is a symbolic link and read whatever it is (a FIFO: `-f <(kubectl logs
// ...)`), as cat reads it; below a directory, a link to a file is read (the kubelet's
// /var/log/containers/*.log are links into /var/log/pods), a link to a directory is not
// followed (loops) and, like any entry that is not a file, is named on stderr, never skipped
// silently; so is a directory with no file in it.
func readPath(sink consumer, maxLine int, path string, stdin io.Reader, stderr io.Writer) (observe.Stats, []error) {
	var total observe.Stats
	if path == "-" {
		br := bufio.NewReader(stdin)
		var in io.Reader = br
		if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			zr, err := observe.Gunzip(br)
			if err != nil {
				return total, []error{fmt.Errorf("stdin: %w", err)}
			}
			in = zr
		}
		st, err := sink(in, observe.Source{Name: "stdin"}, maxLine)
		if err != nil {
			return st, []error{err}
		}
		return st, nil
	}
	warn := func(format string, a ...any) { fmt.Fprintf(stderr, "observe: warning: "+format+"\n", a...) }
	var errs []error
	stopped := false
	readFile := func(p string) {
		fh, err := observe.Open(p, func(n string) (io.ReadCloser, error) { return os.Open(n) })
		if err != nil {
			errs = append(errs, err)
			return
		}
		defer fh.Close()
		st, err := sink(fh, observe.Source{Name: p}, maxLine)
		total.Add(st)
		if le := (*observe.LimitError)(nil); errors.As(err, &le) {
			stopped = true // the run stopped at its bound (the command says so): no more files
			return
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		// Named as the user gave it (-f PATH): os' "stat PATH" names a system call, not the flag.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return total, []error{fmt.Errorf("-f %s: %w", path, err)}
	}
	if !fi.IsDir() {
		readFile(path)
		return total, errs
	}
	root := path
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		root = path + string(filepath.Separator) // WalkDir walks a link given as its root only so
	}
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if stopped {
			return filepath.SkipAll
		}
		if err != nil {
			if d == nil {
				return err // the path itself: nothing below it to read
			}
			errs = append(errs, err)
			return nil
		}
		switch t := d.Type(); {
		case d.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			fi, err := os.Stat(p)
			if err != nil {
				target, _ := os.Readlink(p)
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				errs = append(errs, fmt.Errorf("%s: a symbolic link to %s: %w", p, target, err))
				return nil
			}
			if fi.IsDir() {
				warn("%s: a symbolic link to a directory, not followed (give it with -f to read it)", p)
				return nil
			}
			if !fi.Mode().IsRegular() {
				warn("%s: a symbolic link to a %s, not a file: not read (give it with -f to read it)", p, kindOf(fi.Mode()))
				return nil
			}
		case !t.IsRegular():
			warn("%s: a %s, not a file: not read (give it with -f to read it)", p, kindOf(t))
			return nil
		}
		// The kubelet compresses a rotated log X as X.tmp, renames that to X.gz and only then
		// removes X: a walk in between sees the same lines twice (and observe.Open skips the
		// .tmp for the same reason). X.gz is the one kept.
		if gz, err := os.Stat(p + ".gz"); err == nil && gz.Mode().IsRegular() && !strings.HasSuffix(p, ".gz") {
			warn("%s: not read, %s.gz beside it holds its lines (the kubelet removes the uncompressed copy after the rename; reading both would count its attempts twice)", p, filepath.Base(p))
			return nil
		}
		files++
		readFile(p)
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	if files == 0 && len(errs) == 0 {
		warn("%s: a directory with no file in it (or below it): nothing read from it", path)
	}
	return total, errs
}

// readOnce refuses a file given twice, or inside a directory also given: its attempts would be
// counted twice (an observed amplification of 6 where there were 3). Paths that cannot be read
// are left to the read, which says so.
func readOnce(paths []string) error {
	type given struct {
		path, abs string
		st        os.FileInfo
	}
	var gs []given
	for _, p := range paths {
		if p == "-" {
			continue
		}
		st, err := os.Stat(p)
		abs, aerr := filepath.Abs(p)
		if err != nil || aerr != nil {
			continue
		}
		for _, g := range gs {
			switch {
			case os.SameFile(g.st, st):
				return fmt.Errorf("%s given twice: its lines would be counted twice", p)
			case g.st.IsDir() && strings.HasPrefix(abs, g.abs+string(filepath.Separator)):
				return fmt.Errorf("%s is inside %s, also given: its lines would be counted twice", p, g.path)
			case st.IsDir() && strings.HasPrefix(g.abs, abs+string(filepath.Separator)):
				return fmt.Errorf("%s is inside %s, also given: its lines would be counted twice", g.path, p)
			}
		}
		gs = append(gs, given{p, abs, st})
	}
	return nil
}

// maxMaxLine is the largest --max-line: a line up to it is held in memory.
const maxMaxLine = 1 << 30

// flagName is how a flag is written: "-n" for its shorthand, "--since" otherwise.
func flagName(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return f.Shorthand
	}
	return "-" + f.Name
}

// kindOf names a file mode's type for a message.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

type clusterSource struct {
	kubeconfig, kubeCtx, namespace string
	all                            bool
	selector, container            string
	since                          time.Duration
}

// readCluster lists the pods the selector picks and streams container's log of each through the
// API server, with a progress line on stderr. A pod whose log fails or breaks is one of errs
// (the others are still read); err is a failure before any log (the kubeconfig, the list).
func readCluster(ctx context.Context, sink consumer, maxLine int, s clusterSource, stderr io.Writer) (total observe.Stats, errs []error, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	cc, cfg, err := loadKubeconfig(s.kubeconfig, s.kubeCtx)
	if err != nil {
		return observe.Stats{}, nil, err
	}
	ns := s.namespace
	if s.all {
		ns = ""
	} else if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return observe.Stats{}, nil, fmt.Errorf("the kubeconfig context's namespace: %w", err)
		}
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return observe.Stats{}, nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	where := "in namespace " + ns
	if ns == "" {
		where = "in any namespace"
	}
	selected := "every pod " + where
	if s.selector != "" {
		selected = fmt.Sprintf("the pods -l %q selects %s", s.selector, where)
	}
	pods, err := core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.selector})
	if err != nil {
		return observe.Stats{}, nil, fmt.Errorf("listing %s: %w", selected, err)
	}
	var with []corev1.Pod
	var foreign []string
	for _, p := range pods.Items {
		if !hasContainer(&p, s.container) {
			continue
		}
		if why := notInjected(&p, s.container); why != "" {
			foreign = append(foreign, p.Namespace+"/"+p.Name+": "+why)
			continue
		}
		with = append(with, p)
	}
	sort.Slice(with, func(i, j int) bool {
		return with[i].Namespace+"/"+with[i].Name < with[j].Namespace+"/"+with[j].Name
	})
	sort.Strings(foreign)
	for i, f := range foreign {
		if i == maxSkippedNamed {
			fmt.Fprintf(stderr, "observe: skipped %d more pod(s) with a container %s that retrycap's injector did not add\n", len(foreign)-i, s.container)
			break
		}
		fmt.Fprintf(stderr, "observe: skipped %s\n", f)
	}
	if len(with) == 0 {
		if len(foreign) > 0 {
			return observe.Stats{}, nil, fmt.Errorf("no pod with the container %q (-c) that retrycap's injector added among %s (%d pod(s); %d with a container of that name of their own, skipped above)",
				s.container, selected, len(pods.Items), len(foreign))
		}
		return observe.Stats{}, nil, fmt.Errorf("no pod with a container %q (-c) among %s (%d pod(s))", s.container, selected, len(pods.Items))
	}
	opts := &corev1.PodLogOptions{Container: s.container}
	if s.since > 0 {
		secs := int64((s.since + time.Second - 1) / time.Second)
		opts.SinceSeconds = &secs
	}
	for i := range with {
		p := &with[i]
		fmt.Fprintf(stderr, "\robserve: pod %d/%d %s/%s (%s attempts so far)", i+1, len(with), p.Namespace, p.Name, observe.Thousands(total.Attempts))
		rc, err := core.Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("log of %s/%s container %s: %w", p.Namespace, p.Name, s.container, err))
			continue
		}
		st, err := sink(rc, observe.Source{Name: p.Namespace + "/" + p.Name + "/" + s.container, Service: serviceOfPod(p)}, maxLine)
		rc.Close()
		total.Add(st)
		if le := (*observe.LimitError)(nil); errors.As(err, &le) {
			// The run stopped at its bound: the other pods' logs are not asked for.
			fmt.Fprintf(stderr, "\robserve: stopped at pod %d of %d\n", i+1, len(with))
			return total, errs, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	fmt.Fprintf(stderr, "\robserve: %d pods read\n", len(with))
	return total, errs, nil
}

// maxSkippedNamed is how many pods skipped for a container not injected are named on stderr
// (-A over a cluster may select many); the rest are counted.
const maxSkippedNamed = 20

// notInjected says why the container named name of pod p is not the sidecar retrycap's injector
// added, or "". Only the default -c (retrycap-proxy) is judged: its access log is the one
// observe parses, and a container of the pod's own with that name (another proxy, another
// image) writes lines of its own that would be read as retrycap's attempts. The injector's
// marks are its annotation retrycap.dev/injected (which it removes from a pod that brings a copy)
// and, on the container, the flags it renders (--listen=127.0.0.1:15001, --service=); a
// container of another -c (istio-proxy) is read as before.
func notInjected(p *corev1.Pod, name string) string {
	if name != ProxyContainerName {
		return ""
	}
	if _, ok := p.Annotations[annotations.InjectedStatus]; !ok {
		return fmt.Sprintf("container %s was not added by retrycap's injector (the pod has no annotation %s)", name, annotations.InjectedStatus)
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name != name {
				continue
			}
			listen := slices.Contains(c.Args, "--listen="+sidecar.DefaultListen)
			service := slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--service=") })
			if !listen || !service {
				return fmt.Sprintf("container %s (image %q) lacks the --listen=%s and --service= arguments retrycap's injector gives its proxy", name, workload.Clip(c.Image), sidecar.DefaultListen)
			}
		}
	}
	return ""
}

func hasContainer(p *corev1.Pod, name string) bool {
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// serviceOfPod is the service a pod's sidecar speaks for, for the Envoy outbound lines that do
// not name their caller: the app.kubernetes.io/name label, else app, else the pod's name.
func serviceOfPod(p *corev1.Pod) string {
	for _, l := range []string{"app.kubernetes.io/name", "app"} {
		if v := p.Labels[l]; v != "" {
			return v
		}
	}
	return p.Name
}
