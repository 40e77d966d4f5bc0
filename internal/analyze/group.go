package analyze

import (
	"fmt"
	"regexp"
)

// Repeated warnings are grouped in the human-readable outputs (table, tree summary): on a
// 60-service app the same note about 155 upstreams would bury the one warning that matters.
// Warnings that differ only in their names, numbers and quoted values are one group; a group
// of at least groupMin is printed once, its first warning as the example, with the count. The
// machine formats (JSON, SARIF) keep every warning.

const groupMin = 3

var (
	quotedRE = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	// A source ("file: document 3, item 2") and object names ("Deployment ns/name", "ns/name").
	sourceRE = regexp.MustCompile(`^[^ ]+: document \d+(, item \d+)?: `)
	nameRE   = regexp.MustCompile(`[A-Za-z0-9][-A-Za-z0-9_.]*/[-A-Za-z0-9_.]+`)
	numberRE = regexp.MustCompile(`\d+`)
	fileRE   = regexp.MustCompile(`[^\s:"']+\.(?:yaml|yml|json)\b`)
	kindRE   = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]* _/_`)
	// A cluster-scoped object named first ("MutatingWebhookConfiguration istio-sidecar-injector
	// is also at ...", "ClusterRetryPolicy all: ..."): no slash for nameRE to find.
	clusterRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]* [a-z0-9][-a-z0-9.]*( is also at |: )`)
)

// groupKey is w with what varies between repeats of one warning blanked out.
func groupKey(w string) string {
	k := sourceRE.ReplaceAllString(w, "")
	k = clusterRE.ReplaceAllString(k, "_ _/_$1")
	k = quotedRE.ReplaceAllString(k, `"_"`)
	// A file named in the text ("is also at deploy/a/b.yaml: document 2"): paths of different
	// depths are one.
	k = fileRE.ReplaceAllString(k, "_file_")
	k = nameRE.ReplaceAllString(k, "_/_")
	// The kind before a name too: "Service shop/a is also at ..." and "Deployment shop/a is
	// also at ..." are one warning (Istio's samples read with -R gave 52 lines of them, grouped
	// by kind and file into groups too small to fold).
	k = kindRE.ReplaceAllString(k, "_ _/_")
	return numberRE.ReplaceAllString(k, "#")
}

// GroupWarnings returns ws with each group of groupMin or more repeats replaced by its first,
// followed by the count ("(and 154 more like it)"), in the order the groups first appear:
// discover prints its warnings so too.
func GroupWarnings(ws []string) []string { return groupWarnings(ws) }

// groupWarnings is GroupWarnings.
func groupWarnings(ws []string) []string {
	count := map[string]int{}
	for _, w := range ws {
		count[groupKey(w)]++
	}
	var out []string
	done := map[string]bool{}
	for _, w := range ws {
		k := groupKey(w)
		switch n := count[k]; {
		case n < groupMin:
			out = append(out, w)
		case !done[k]:
			done[k] = true
			out = append(out, fmt.Sprintf("%s (and %d more like it; -o json lists them all)", w, n-1))
		}
	}
	return out
}
