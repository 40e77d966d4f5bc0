package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/retrycap/retrycap/internal/jsonfield"
)

// A document the YAML parser refuses is still named by its object where that can be read: a
// key written twice ("key \"retries\" already set in map") said neither which object nor which
// field, and a syntax error (a tab) nothing of the object.

// looseIdent reads a document's apiVersion, kind, metadata.name and metadata.namespace from
// what of it parses: its node tree when the parser reads it (a key written twice is no error
// there), else its lines (top-level "kind: X", and "name:" and "namespace:" at the first
// indentation under "metadata:"). nil when neither a kind nor a name is found.
func looseIdent(raw []byte) *typeMeta {
	var tm typeMeta
	var doc yamlv3.Node
	if yamlv3.Unmarshal(raw, &doc) == nil && len(doc.Content) == 1 && doc.Content[0].Kind == yamlv3.MappingNode {
		top := doc.Content[0]
		tm.APIVersion, tm.Kind = scalarOf(top, "apiVersion"), scalarOf(top, "kind")
		if md := valueOf(top, "metadata"); md != nil && md.Kind == yamlv3.MappingNode {
			tm.Metadata.Name, tm.Metadata.Namespace = scalarOf(md, "name"), scalarOf(md, "namespace")
		}
	} else {
		tm = identFromLines(raw)
	}
	if tm.Kind == "" || tm.Metadata.Name == "" {
		return nil
	}
	return &tm
}

// valueOf is the value of key in mapping n (the first, when written twice), nil when absent.
func valueOf(n *yamlv3.Node, key string) *yamlv3.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yamlv3.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalarOf(n *yamlv3.Node, key string) string {
	if v := valueOf(n, key); v != nil && v.Kind == yamlv3.ScalarNode {
		return v.Value
	}
	return ""
}

// identFromLines is looseIdent's reading of a document the parser refuses, line by line.
func identFromLines(raw []byte) typeMeta {
	var tm typeMeta
	inMeta, indent := false, -1
	for l := range bytes.Lines(raw) {
		s := strings.TrimRight(string(l), "\r\n")
		t := strings.TrimLeft(s, " ")
		if t == "" || t[0] == '#' {
			continue
		}
		depth := len(s) - len(t)
		if depth == 0 {
			inMeta = false
			key, val, _ := strings.Cut(s, ":")
			switch key {
			case "apiVersion":
				tm.APIVersion = plainScalar(val)
			case "kind":
				tm.Kind = plainScalar(val)
			case "metadata":
				inMeta, indent = strings.TrimSpace(val) == "", -1
			}
			continue
		}
		if !inMeta {
			continue
		}
		if indent < 0 {
			indent = depth
		}
		if depth != indent {
			continue
		}
		key, val, _ := strings.Cut(t, ":")
		switch key {
		case "name":
			tm.Metadata.Name = plainScalar(val)
		case "namespace":
			tm.Metadata.Namespace = plainScalar(val)
		}
	}
	return tm
}

// plainScalar is the value after a key's colon: unquoted, its comment dropped; "" for anything
// that is not one plain word (a flow mapping, a block scalar).
func plainScalar(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	if u, err := strconv.Unquote(v); err == nil {
		v = u
	} else if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		v = strings.ReplaceAll(v[1:len(v)-1], "''", "'")
	}
	if v == "" || strings.ContainsAny(v, "{}[]|>&*!\t ") {
		return ""
	}
	return v
}

// duplicateFields is every key written twice in one mapping of raw, by its field path and both
// lines in the file (the document's line 1 is the file's first), or nil when the node tree does
// not show one (the strict parser's YAML 1.1 reading can make two spellings one key: "yes" and
// "true"). A key a merge key ("<<") brings in is no duplicate: the mapping's own wins.
func duplicateFields(raw []byte, first int) *jsonfield.StrictError {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(raw, &doc) != nil || len(doc.Content) != 1 {
		return nil
	}
	var se jsonfield.StrictError
	var walk func(n *yamlv3.Node, path string)
	walk = func(n *yamlv3.Node, path string) {
		switch n.Kind {
		case yamlv3.MappingNode:
			seen := map[string]*yamlv3.Node{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Kind != yamlv3.ScalarNode || k.Tag == "!!merge" || k.Value == "<<" {
					continue
				}
				p := jsonfield.Join(path, k.Value)
				if prev, ok := seen[k.Value]; ok {
					where := fmt.Sprintf("lines %d and %d", prev.Line+first-1, k.Line+first-1)
					if prev.Line == k.Line { // JSON on one line
						where = fmt.Sprintf("line %d, columns %d and %d", k.Line+first-1, prev.Column, k.Column)
					}
					se.Fields = append(se.Fields, jsonfield.StrictField{
						Error: jsonfield.Error{Path: p, Msg: "duplicate field"},
						Text:  fmt.Sprintf("duplicate field %q (%s; kubectl apply would keep the later without a word): write it once", p, where),
					})
				} else {
					seen[k.Value] = k
				}
				walk(n.Content[i+1], p)
			}
		case yamlv3.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(doc.Content[0], "")
	if len(se.Fields) == 0 {
		return nil
	}
	return &se
}

// nameDocumentError puts before the error of a document the parser refused its object
// ("VirtualService shop/reviews: "), when looseIdent reads one, and for a key written twice
// says which field and on which lines, in place of the parser's "key ... already set in map".
func (r Reader) nameDocumentError(err error, d document) error {
	first := d.line - leadingBlanks(d.raw)
	if strings.Contains(err.Error(), "already set in map") {
		if se := duplicateFields(d.raw, first); se != nil {
			err = se
		}
	}
	err = tabAt(err, d.raw, first)
	if tm := looseIdent(d.raw); tm != nil {
		return fmt.Errorf("%s: %w", r.ident(tm), err)
	}
	return err
}

// tabAt adds to a YAML syntax error on a line that holds a tab where it is and why: the
// parser's "found character that cannot start any token" does not say which character.
func tabAt(err error, raw []byte, first int) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil || !strings.Contains(err.Error(), "yaml: ") || strings.Contains(err.Error(), "duplicate field") {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	i := 0
	for l := range bytes.Lines(raw) {
		if i++; i == n-first+1 {
			if c := bytes.IndexByte(l, '\t'); c >= 0 {
				return fmt.Errorf("%w (a tab at line %d, column %d: YAML indents with spaces, never tabs)", err, n, c+1)
			}
			break
		}
	}
	return err
}

// looseJSONIdent names an object whose identity fields do not all decode (metadata.namespace
// given as a list): "Kind name", its kind and name read where they are strings; "" without both.
func looseJSONIdent(js []byte) string {
	var o struct {
		Kind     any `json:"kind"`
		Metadata struct {
			Name any `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &o) != nil {
		return ""
	}
	kind, _ := o.Kind.(string)
	name, _ := o.Metadata.Name.(string)
	if kind == "" || name == "" {
		return ""
	}
	return kind + " " + name
}

// jsonSyntaxAt adds to the YAML parser's error for a document written as JSON (it starts with
// "{") what a JSON parser says and where: "yaml: did not find expected node content" named no
// line. kubectl reads such a document as JSON first, then as YAML.
func jsonSyntaxAt(err error, d document) error {
	t := bytes.TrimLeft(d.raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' && t[0] != '[' {
		return err
	}
	var v any
	jerr := json.Unmarshal(d.raw, &v)
	var se *json.SyntaxError
	if !errors.As(jerr, &se) {
		return err
	}
	line, col := d.line-leadingBlanks(d.raw), 1
	for _, c := range d.raw[:se.Offset-1] {
		if c == '\n' {
			line, col = line+1, 0
		}
		col++
	}
	return fmt.Errorf("%w (as JSON: %v, at line %d, column %d)", err, se, line, col)
}

// The YAML parser's syntax errors say the line wrongly or not at all: a parser error ("did not
// find expected key") gives its 0-based line (the line before the one at fault: " bad: x" on
// line 5 was "line 4"), and an error on the document's first line gives none (a document at line
// 40 of a file, "yaml: mapping values are not allowed in this context", named no line at all).
// The parser's and scanner's problems are told apart by their words (go.yaml.in/yaml/v2
// parserc.go's and scannerc.go's messages).
var (
	syntaxErrRE     = regexp.MustCompile(`yaml: (?:line (\d+): )?(.+)$`)
	parserProblems  = []string{"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator", "did not find expected <document start>", "did not find expected <stream-start>", "did not find expected key", "did not find expected node content", "found duplicate %TAG directive", "found duplicate %YAML directive", "found incompatible YAML document", "found undefined tag handle"}
	scannerProblems = []string{"block sequence entries are not allowed", "could not find expected", "did not find expected alphabetic", "did not find expected comment", "did not find expected digit", "did not find expected hexdecimal", "did not find expected version", "did not find expected whitespace", "did not find the expected '>'", "exceeded max depth", "found a tab character", "found an indentation indicator", "found character that cannot start any token", "found extremely long version", "found invalid Unicode", "found unexpected document indicator", "found unexpected end of stream", "found unexpected non-alphabetical", "found unknown directive", "found unknown escape", "mapping keys are not allowed", "mapping values are not allowed"}
)

// syntaxLine rewrites the line of a YAML syntax error of raw (a document) into its true 1-based
// line in raw, at most raw's last line (a problem found at the end of the input is on the line
// after the last).
func syntaxLine(err error, raw []byte) error {
	msg := err.Error()
	m := syntaxErrRE.FindStringSubmatchIndex(msg)
	if m == nil {
		return err
	}
	problem := msg[m[4]:m[5]]
	line := 0
	if m[2] >= 0 {
		line, _ = strconv.Atoi(msg[m[2]:m[3]])
	}
	switch {
	case slices.ContainsFunc(parserProblems, func(p string) bool { return strings.HasPrefix(problem, p) }):
		line++ // 0-based; none is line 0
	case line == 0 && slices.ContainsFunc(scannerProblems, func(p string) bool { return strings.HasPrefix(problem, p) }):
		line = 1
	default:
		return err
	}
	last := bytes.Count(raw, []byte("\n"))
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		last++
	}
	line = max(1, min(line, last))
	return errors.New(msg[:m[0]] + "yaml: line " + strconv.Itoa(line) + ": " + problem)
}
