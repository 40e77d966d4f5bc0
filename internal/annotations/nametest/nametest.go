// Package nametest is the table of the upstream-name rule (upstream-names.txt), for the tests of
// both sides of it: the graph's (internal/workload) and the proxy's (internal/proxy/policy,
// internal/proxy). Only tests import it.
package nametest

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed upstream-names.txt
var table string

// Case is one row of the table.
type Case struct {
	Line      int    // in upstream-names.txt
	Upstreams string // the annotation's value, the proxy's --upstreams
	Namespace string // the workload's namespace, the proxy's --namespace
	Host      string // a request host
	Match     string // the upstream (as written) the proxy matches; "" none
	Node      string // the graph node of Host in Namespace; "" when Namespace is empty
}

func (c Case) String() string {
	return fmt.Sprintf("upstream-names.txt:%d (upstreams %q, namespace %q, host %q)", c.Line, c.Upstreams, c.Namespace, c.Host)
}

// Cases parses the table; a malformed row panics (the table is a constant of the tests).
func Cases() []Case {
	var out []Case
	for i, line := range strings.Split(table, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 5 {
			panic(fmt.Sprintf("upstream-names.txt:%d: want 5 columns separated by |, got %d", i+1, len(f)))
		}
		for j := range f {
			f[j] = strings.TrimSpace(f[j])
			if f[j] == "-" {
				f[j] = ""
			}
		}
		out = append(out, Case{Line: i + 1, Upstreams: f[0], Namespace: f[1], Host: f[2], Match: f[3], Node: f[4]})
	}
	return out
}
