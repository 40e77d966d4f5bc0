package analyze

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
)

// BudgetNote is printed under analyze's table: the run-time chain cap depends on apps.
const BudgetNote = "note: one cap per chain at run time needs every app to propagate the Retrycap-Budget header " +
	"(or baggage member retrycap-budget) from its inbound request to its outbound calls, like traceparent; " +
	"where an app does not, its proxy treats the call as an entry and only the retry budget bounds the aggregate."

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// maxEntrypointsShown is how many entrypoints the table's line names: Train-Ticket's Istio
// manifests (64 workloads, every one a default entrypoint) made it one line of 2,084 characters.
const maxEntrypointsShown = 10

// entrypointsLine names the entrypoints with their client attempts, the first
// maxEntrypointsShown of them when there are more (their count first; -o json lists them all).
func entrypointsLine(eps []graph.Entrypoint) string {
	var names []string
	for i, e := range eps {
		if i == maxEntrypointsShown {
			break
		}
		names = append(names, fmt.Sprintf("%s (client x%d)", e.Service, e.ClientAttempts))
	}
	if len(eps) > maxEntrypointsShown {
		return fmt.Sprintf("%d: %s, ... (%d of %d shown; -o json lists them all)", len(eps), strings.Join(names, ", "), maxEntrypointsShown, len(eps))
	}
	return orNone(strings.Join(names, ", "))
}

// RenderTable writes a human-readable report, one block per policy.
func RenderTable(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, p := range rep.Policies {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if p.NotChecked != "" {
			fmt.Fprintf(tw, "%s  cap %d  NOT CHECKED (see \"not checked\" above)\n", p.Title(), p.Cap)
		} else {
			fmt.Fprintf(tw, "%s  cap %d  amplification %s%s  WITHIN CAP: %s\n",
				p.Title(), p.Cap, atMost(p.AmplificationIsBound), amount(p.Amplification, p.Bounded), yesNo(p.WithinCap))
		}
		if p.Kind == KindCluster {
			fmt.Fprintf(tw, "  namespaces:\t%s\n", orNone(strings.Join(p.Namespaces, ", ")))
		}
		fmt.Fprintf(tw, "  enforcement:\t%s\n", p.Enforcement)
		fmt.Fprintf(tw, "  services, edges:\t%d, %d\n", p.Services, p.Edges)
		fmt.Fprintf(tw, "  entrypoints:\t%s\n", entrypointsLine(p.Entrypoints))
		if p.NotChecked != "" {
			// Nothing was checked: a worst path "= 1 <= cap", one chain per lone service and an
			// "unbounded" time would read as results (Sock Shop, 14 workloads, no upstreams).
			for _, e := range p.Errors {
				fmt.Fprintf(tw, "  error: %s\n", e)
			}
			for _, wn := range groupWarnings(p.Warnings) {
				fmt.Fprintf(tw, "  warning: %s\n", wn)
			}
			continue
		}
		switch {
		case len(p.WorstPath) > 0 && !p.Bounded:
			fmt.Fprintf(tw, "  worst path:\t%s, into the retry cycle\n", strings.Join(p.WorstPath, " -> "))
		case len(p.WorstPath) > 0:
			fmt.Fprintf(tw, "  worst path:\t%s\n", graph.Explain(p.WorstPath, p.WorstPathFactors, p.Cap))
		}
		if ls := worstLayers(&p); len(ls) > 0 {
			fmt.Fprintf(tw, "  layers:\n")
			for _, l := range ls {
				fmt.Fprintf(tw, "    %s -x%d-> %s: %s\n", l.From, l.Attempts, l.To, l.Explain)
			}
		}
		switch {
		case p.WorstCaseLoad.Service != "" && p.LoadIsBound:
			fmt.Fprintf(tw, "  worst-case load:\t%s requests at %s, at most, per request at every entrypoint at once (too many entrypoints to take each; fan-out included)\n",
				graph.FormatAmount(p.WorstCaseLoad.Requests), p.WorstCaseLoad.Service)
		case p.WorstCaseLoad.Service != "":
			fmt.Fprintf(tw, "  worst-case load:\t%s requests at %s per entry request at %s (fan-out included)\n",
				graph.FormatAmount(p.WorstCaseLoad.Requests), p.WorstCaseLoad.Service, p.LoadEntrypoint)
		}
		if p.LoadUnbounded != "" {
			fmt.Fprintf(tw, "  load unbounded:\t%s\n", p.LoadUnbounded)
		}
		if p.Cycle != nil {
			fmt.Fprintf(tw, "  retry cycle:\t%s\n", strings.Join(p.Cycle, " -> "))
		}
		for i, c := range p.Cycles {
			label := ""
			if i == 0 {
				label = "cycles:"
			}
			fmt.Fprintf(tw, "  %s\t%s%s\n", label, c.String(), cycleNote(c))
		}
		if len(p.Chains) > 1 {
			fmt.Fprintf(tw, "  chains:\n")
			for _, c := range p.Chains {
				fmt.Fprintf(tw, "    %s\t%s\t%s\n", c.Entrypoint, amount(c.Amplification, c.Amplification != graph.Saturated), strings.Join(c.Path, ">"))
			}
		}
		if len(p.Violations) > 0 {
			if p.ViolationsTotal > len(p.Violations) {
				fmt.Fprintf(tw, "  violations (%d of %d shown; -o patch gives the whole fix):\n", len(p.Violations), p.ViolationsTotal)
			} else {
				fmt.Fprintf(tw, "  violations:\n")
			}
			for _, g := range groupViolations(p.Violations) {
				if len(g.chains) == 1 {
					v := g.chains[0]
					fmt.Fprintf(tw, "    - %s\n", v.Message)
					if v.Suggestion != "" {
						fmt.Fprintf(tw, "      fix: %s\n", v.Suggestion)
					}
					continue
				}
				fmt.Fprintf(tw, "    - %d chains over the cap take one fix", len(g.chains))
				if len(g.edges) > 0 {
					fmt.Fprintf(tw, " (edges %s)", strings.Join(g.edges, ", "))
				}
				fmt.Fprintf(tw, ": %s\n", g.fix)
				// The first chain whole (its layers, an example), the others by their product
				// alone: -o json gives each whole.
				for i, v := range g.chains {
					head := v.Message
					if i > 0 {
						head, _, _ = strings.Cut(v.Message, "; ")
					}
					fmt.Fprintf(tw, "      %s\n", head)
				}
			}
		}
		renderTime(tw, &p) // time.go
		for _, e := range p.Errors {
			fmt.Fprintf(tw, "  error: %s\n", e)
		}
		for _, wn := range groupWarnings(p.Warnings) {
			fmt.Fprintf(tw, "  warning: %s\n", wn)
		}
	}
	if len(rep.Policies) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, BudgetNote)
	}
	return tw.Flush()
}

// atMost prefixes an amplification that is an upper bound.
func atMost(bound bool) string {
	if bound {
		return "at most "
	}
	return ""
}

// cycleNote says how a cycle was counted.
func cycleNote(c graph.CycleReport) string {
	switch {
	case !c.Exact:
		return ": not a call loop; too large to search, its numbers are upper bounds"
	case c.Retries:
		return ": not a call loop, retries counted once per chain (chains visit each service once)"
	}
	return ": not a call loop, no retries on it"
}

func amount(x int64, bounded bool) string {
	if !bounded {
		return "unbounded"
	}
	return graph.FormatAmount(x)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// worstLayers are the mesh layers, of more than 1 try, on the worst path's edges and its
// entrypoint's client attempts, in path order.
func worstLayers(p *PolicyReport) []EdgeLayers {
	var out []EdgeLayers
	for i, n := range p.WorstPath {
		from := "client"
		if i > 0 {
			from = p.WorstPath[i-1]
		}
		for _, l := range p.Layers {
			if l.From == from && l.To == n && l.Attempts != l.App {
				out = append(out, l)
			}
		}
	}
	return out
}

// RenderJSON writes the report as indented JSON.
func RenderJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // messages hold "->", which is not HTML
	return enc.Encode(rep)
}

// onWorst returns the set of worst-path nodes and edges ("a>b").
func onWorst(p *PolicyReport) (map[string]bool, map[string]bool) {
	nodes, edges := map[string]bool{}, map[string]bool{}
	path := p.WorstPath
	if p.Cycle != nil {
		path = p.Cycle
	}
	for i, s := range path {
		nodes[s] = true
		if i > 0 {
			edges[path[i-1]+">"+s] = true
		}
	}
	return nodes, edges
}

func edgeLabel(e graph.Edge) string {
	if e.Calls > 1 {
		return "x" + strconv.FormatInt(e.Attempts, 10) + " *" + strconv.FormatInt(e.Calls, 10)
	}
	return "x" + strconv.FormatInt(e.Attempts, 10)
}

// RenderDOT writes one Graphviz digraph: attempts (and calls) on the edges, the worst path (or
// the retry cycle) in red, upstream-only services dashed. Several policies become one cluster
// each inside a single digraph (node IDs prefixed with the policy, labels the service names), so
// that `dot -Tsvg > graph.svg` makes one valid SVG document rather than several concatenated.
func RenderDOT(w io.Writer, rep *Report) error {
	var b strings.Builder
	switch len(rep.Policies) {
	case 0:
	case 1:
		p := &rep.Policies[0]
		fmt.Fprintf(&b, "digraph %q {\n  rankdir=LR;\n  node [shape=box];\n", p.ID())
		writeDOTPolicy(&b, p, "", "  ")
		b.WriteString("}\n")
	default:
		b.WriteString("digraph \"retrycap\" {\n  rankdir=LR;\n  node [shape=box];\n")
		for i := range rep.Policies {
			p := &rep.Policies[i]
			prefix := p.ID() + "/"
			fmt.Fprintf(&b, "  subgraph %q {\n", "cluster_"+p.ID())
			writeDOTPolicy(&b, p, prefix, "    ")
			b.WriteString("  }\n")
		}
		b.WriteString("}\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDOTPolicy writes one policy's label, nodes and edges; node IDs are prefix+service, and
// carry an explicit label when prefixed.
func writeDOTPolicy(b *strings.Builder, p *PolicyReport, prefix, indent string) {
	nodes, edges := onWorst(p)
	fmt.Fprintf(b, "%slabel=%q;\n", indent, fmt.Sprintf("%s: amplification %s, cap %d", p.ID(), amount(p.Amplification, p.Bounded), p.Cap))
	for _, s := range p.Graph.Services {
		var attrs []string
		if prefix != "" {
			attrs = append(attrs, fmt.Sprintf("label=%q", s.Name))
		}
		if !s.Selected {
			attrs = append(attrs, "style=dashed")
		}
		if nodes[s.Name] {
			attrs = append(attrs, "color=red", "penwidth=2")
		}
		if len(attrs) > 0 {
			fmt.Fprintf(b, "%s%q [%s];\n", indent, prefix+s.Name, strings.Join(attrs, ", "))
		} else {
			fmt.Fprintf(b, "%s%q;\n", indent, prefix+s.Name)
		}
	}
	for _, e := range p.Graph.Edges {
		attrs := fmt.Sprintf("label=%q", edgeLabel(e))
		if edges[e.From+">"+e.To] {
			attrs += ", color=red, penwidth=2"
		}
		fmt.Fprintf(b, "%s%q -> %q [%s];\n", indent, prefix+e.From, prefix+e.To, attrs)
	}
}

// RenderMermaid writes one Mermaid flowchart, worst path highlighted. Several policies become
// one subgraph each inside a single flowchart (a Markdown mermaid block holds one diagram).
func RenderMermaid(w io.Writer, rep *Report) error {
	var b strings.Builder
	var worst, links []string
	linkBase := 0
	switch len(rep.Policies) {
	case 0:
	case 1:
		p := &rep.Policies[0]
		fmt.Fprintf(&b, "---\ntitle: %s amplification %s cap %d\n---\nflowchart LR\n", p.ID(), amount(p.Amplification, p.Bounded), p.Cap)
		worst, links, _ = writeMermaidPolicy(&b, p, "n", "  ", 0)
	default:
		b.WriteString("flowchart LR\n")
		for i := range rep.Policies {
			p := &rep.Policies[i]
			fmt.Fprintf(&b, "  subgraph p%d[%q]\n", i, fmt.Sprintf("%s amplification %s cap %d", p.ID(), amount(p.Amplification, p.Bounded), p.Cap))
			w, l, n := writeMermaidPolicy(&b, p, "p"+strconv.Itoa(i)+"n", "    ", linkBase)
			worst, links, linkBase = append(worst, w...), append(links, l...), linkBase+n
			b.WriteString("  end\n")
		}
	}
	if len(worst) > 0 {
		fmt.Fprintf(&b, "  classDef worst stroke:#d00,stroke-width:3px\n  class %s worst\n", strings.Join(worst, ","))
	}
	if len(links) > 0 {
		fmt.Fprintf(&b, "  linkStyle %s stroke:#d00,stroke-width:3px\n", strings.Join(links, ","))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMermaidPolicy writes one policy's nodes (IDs idPrefix+index) and edges; it returns the
// worst-path node IDs, the worst-path link indexes (numbered from linkBase: Mermaid counts links
// across the whole diagram) and the number of links written.
func writeMermaidPolicy(b *strings.Builder, p *PolicyReport, idPrefix, indent string, linkBase int) (worst, links []string, n int) {
	nodes, edges := onWorst(p)
	id := map[string]string{}
	for j, s := range p.Graph.Services {
		id[s.Name] = idPrefix + strconv.Itoa(j)
		shape := "[%q]"
		if !s.Selected {
			shape = "([%q])"
		}
		fmt.Fprintf(b, "%s%s"+shape+"\n", indent, id[s.Name], s.Name)
		if nodes[s.Name] {
			worst = append(worst, id[s.Name])
		}
	}
	for j, e := range p.Graph.Edges {
		fmt.Fprintf(b, "%s%s -->|%s| %s\n", indent, id[e.From], edgeLabel(e), id[e.To])
		if edges[e.From+">"+e.To] {
			links = append(links, strconv.Itoa(linkBase+j))
		}
	}
	return worst, links, len(p.Graph.Edges)
}

// RenderTree writes each policy's graph as an indented tree from its entrypoints, with the
// attempts on each edge ("-x3->") and the worst path marked "*": only along the worst path
// itself (from its entrypoint, hop by hop), never on another branch that shares an edge, and
// expanded there even where its services were shown before. A service already shown is not
// expanded again ("(see above)"), and a way back into the current path is marked "(cycle)".
func RenderTree(w io.Writer, rep *Report) error {
	var b strings.Builder
	for i, p := range rep.Policies {
		if i > 0 {
			b.WriteString("\n")
		}
		worst := p.WorstPath
		fmt.Fprintf(&b, "%s  cap %d  amplification %s  (* worst path)\n", p.Title(), p.Cap, amount(p.Amplification, p.Bounded))
		out := map[string][]graph.Edge{}
		for _, e := range p.Graph.Edges {
			out[e.From] = append(out[e.From], e)
		}
		shown := map[string]bool{}
		onPath := map[string]bool{}
		// depth is the number of hops from the entrypoint; onWorst: the tree path so far is the
		// worst path's beginning.
		var walk func(name, prefix string, depth int, onWorst bool)
		walk = func(name, prefix string, depth int, onWorst bool) {
			shown[name] = true
			onPath[name] = true
			kids := out[name]
			for k, e := range kids {
				last := k == len(kids)-1
				branch, next := "├─", "│  "
				if last {
					branch, next = "└─", "   "
				}
				worstHop := onWorst && depth+1 < len(worst) && worst[depth+1] == e.To
				mark := ""
				if worstHop {
					mark = " *"
				}
				fmt.Fprintf(&b, "%s%s -%s-> %s%s", prefix, branch, edgeLabel(e), e.To, mark)
				switch {
				case onPath[e.To]:
					b.WriteString(" (cycle)\n")
				case shown[e.To] && len(out[e.To]) > 0 && !worstHop:
					b.WriteString(" (see above)\n")
				default:
					b.WriteString("\n")
					walk(e.To, prefix+next, depth+1, worstHop)
				}
			}
			onPath[name] = false
		}
		marked := false
		for _, ep := range p.Entrypoints {
			isWorst := !marked && len(worst) > 0 && worst[0] == ep.Service
			marked = marked || isWorst
			mark := ""
			if isWorst {
				mark = " *"
			}
			fmt.Fprintf(&b, "%s (client x%d)%s\n", ep.Service, ep.ClientAttempts, mark)
			walk(ep.Service, "", 0, isWorst)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RenderSummary writes what was read, the warnings, and why nothing (or not everything) was
// checked: analyze prints it first (on stdout before a table or tree, on stderr before the
// machine formats).
func RenderSummary(w io.Writer, rep *Report) error {
	var b strings.Builder
	if s := rep.Summary; s != nil {
		fmt.Fprintf(&b, "read: %d file(s), %d object(s): %d workload(s) (%d declare %s), %d Service(s), ",
			s.Files, s.Objects, s.Workloads, s.WithUpstreams, annotations.Upstreams, s.Services)
		if s.Namespaces > 0 {
			fmt.Fprintf(&b, "%d Namespace(s), ", s.Namespaces)
		}
		fmt.Fprintf(&b, "%d RetryPolicy(ies)", s.Policies)
		if s.ClusterPolicies > 0 {
			fmt.Fprintf(&b, ", %d ClusterRetryPolicy(ies)", s.ClusterPolicies)
		}
		if len(s.Mesh) > 0 {
			fmt.Fprintf(&b, "; mesh objects: %s", kindCounts(s.Mesh))
		}
		if len(s.Ignored) > 0 {
			fmt.Fprintf(&b, "; ignored: %s", kindCounts(s.Ignored))
		}
		if s.Skipped > 0 {
			fmt.Fprintf(&b, "; %d skipped (not manifests)", s.Skipped)
		}
		b.WriteString("\n")
	}
	for _, wn := range groupWarnings(rep.Warnings) {
		fmt.Fprintf(&b, "warning: %s\n", wn)
	}
	for _, u := range rep.Unchecked {
		fmt.Fprintf(&b, "not checked: %s\n", u)
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// violationGroup is the violations of a policy that one fix covers, for the human output (a
// 60-service app repeated one mesh default's fix for each of 13 chains; DESIGN.md "Output a
// person can read on a 60-service app"). JSON and SARIF keep one entry per violation.
type violationGroup struct {
	fix    string
	edges  []string // the edges the fix is said of, in order of first appearance ("" none)
	chains []graph.Violation
}

// groupViolations groups vs by their fix, in order of first appearance. A fix said of the
// chain's own edge ("fraud-detection -> flagd: Istio default, no VirtualService binds flagd:
// ...") is keyed without that edge, which the group lists: the same words about the same callee
// are one lever (the callee's route, the mesh's default), whichever caller meets it. Fixes
// written per caller ("gateway: order=2") differ in their text and stay apart. A violation
// without a fix is its own group.
func groupViolations(vs []graph.Violation) []*violationGroup {
	var out []*violationGroup
	byFix := map[string]*violationGroup{}
	for _, v := range vs {
		fix, edge := v.Suggestion, ""
		for k := 1; k < len(v.Path); k++ {
			prefix := v.Path[k-1] + " -> " + v.Path[k] + ": "
			if rest, ok := strings.CutPrefix(fix, prefix); ok {
				fix, edge = rest, strings.TrimSuffix(prefix, ": ")
				break
			}
		}
		g := byFix[fix]
		if fix == "" || g == nil {
			g = &violationGroup{fix: fix}
			out = append(out, g)
			if fix != "" {
				byFix[fix] = g
			}
		}
		if edge != "" && !slices.Contains(g.edges, edge) {
			g.edges = append(g.edges, edge)
		}
		g.chains = append(g.chains, v)
	}
	return out
}
