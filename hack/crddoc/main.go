package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crddoc FILE...")
		os.Exit(2)
	}
	for _, file := range os.Args[1:] {
		if err := rewrite(file); err != nil {
			fmt.Fprintf(os.Stderr, "crddoc: %v\n", err)
			os.Exit(1)
		}
	}
}

// rewrite joins the descriptions of one CRD file in place. The file is a YAML document as
// controller-gen writes it ("---" and the CRD); the CRD goes through a map, which
// sigs.k8s.io/yaml writes with sorted keys exactly as controller-gen does, so only the
// descriptions change.
func rewrite(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	body, hadHeader := bytes.CutPrefix(data, []byte("---\n"))
	var crd map[string]any
	if err := yaml.Unmarshal(body, &crd); err != nil {
		return fmt.Errorf("parsing %s: %w", file, err)
	}
	if crd["kind"] != "CustomResourceDefinition" {
		return fmt.Errorf("%s: kind %v, want CustomResourceDefinition", file, crd["kind"])
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		version, _ := v.(map[string]any)
		schema, _ := version["schema"].(map[string]any)
		if s, ok := schema["openAPIV3Schema"].(map[string]any); ok {
			joinSchema(s)
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if hadHeader {
		out = append([]byte("---\n"), out...)
	}
	if bytes.Equal(out, data) {
		return nil
	}
	tmp := file + ".crddoc"
	if err := os.WriteFile(tmp, out, 0o644); err != nil { //nolint:gosec // a checked-in manifest, readable by all like the file it replaces
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("replacing %s: %w", file, err)
	}
	return nil
}

// joinSchema rewrites the description of a schema and of every schema under it. Only the
// keywords that hold schemas are walked: a property named "description" is a schema, not text.
func joinSchema(s map[string]any) {
	if d, ok := s["description"].(string); ok {
		s["description"] = Join(d)
	}
	for _, key := range []string{"properties", "patternProperties", "definitions"} {
		if m, ok := s[key].(map[string]any); ok {
			for _, sub := range m {
				if subSchema, ok := sub.(map[string]any); ok {
					joinSchema(subSchema)
				}
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties", "not"} {
		if sub, ok := s[key].(map[string]any); ok {
			joinSchema(sub)
		}
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf", "items"} {
		if list, ok := s[key].([]any); ok {
			for _, sub := range list {
				if subSchema, ok := sub.(map[string]any); ok {
					joinSchema(subSchema)
				}
			}
		}
	}
}

// Join formats one description as Kubernetes' generators do: the lines of a paragraph joined
// with one space, a blank line kept as a paragraph break, an indented line and a list item kept
// on a line of their own.
func Join(doc string) string {
	var b strings.Builder
	// open is true while the last line written is a paragraph line the next one may continue.
	open := false
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimRight(line, " \t")
		switch {
		case line == "":
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n\n") {
				if !strings.HasSuffix(b.String(), "\n") {
					b.WriteString("\n")
				}
				b.WriteString("\n")
			}
			open = false
		case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
			if open {
				b.WriteString("\n")
			}
			b.WriteString(line)
			b.WriteString("\n")
			open = false
		case strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "* "):
			if open {
				b.WriteString("\n")
			}
			b.WriteString(line)
			open = true
		default:
			if open {
				b.WriteString(" ")
			}
			b.WriteString(line)
			open = true
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
