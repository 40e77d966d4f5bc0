package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestJoin(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"one line", "Window is the period.", "Window is the period."},
		{"paragraph", "MaxAmplification is the cap on retry multiplication along any chain: client attempts times\nthe attempts of every hop on the path.",
			"MaxAmplification is the cap on retry multiplication along any chain: client attempts times the attempts of every hop on the path."},
		{"two paragraphs", "First line\ngoes on.\n\nSecond\nparagraph.", "First line goes on.\n\nSecond paragraph."},
		{"several blank lines are one break", "a\n\n\n\nb", "a\n\nb"},
		{"indented lines stay", "Example:\n  kind: RetryPolicy\n  spec: {}\nAfter.", "Example:\n  kind: RetryPolicy\n  spec: {}\nAfter."},
		{"indented before a blank line", "Example:\n\tx: 1\n\nNext.", "Example:\n\tx: 1\n\nNext."},
		{"list items stay", "Modes:\n- Reject denies\n  it.\n- Audit\nwarns.", "Modes:\n- Reject denies\n  it.\n- Audit warns."},
		{"trailing spaces and blank end", "a  \nb\n\n", "a b"},
	} {
		if got := Join(c.in); got != c.want {
			t.Errorf("%s: Join(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// rawCRD is a CRD as controller-gen writes it: the Go comments' line breaks kept, and a property
// named "description", which is a schema, not text.
const rawCRD = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  names:
    kind: Thing
    plural: things
  scope: Namespaced
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        description: |-
          Thing is a
          thing.
        properties:
          description:
            description: |-
              Description is free
              text.

              Up to 10 bytes.
            maxLength: 10
            type: string
          items:
            items:
              description: |-
                An item
                of the list.
              type: string
            type: array
        type: object
    served: true
    storage: true
`

const joinedCRD = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  names:
    kind: Thing
    plural: things
  scope: Namespaced
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        description: Thing is a thing.
        properties:
          description:
            description: |-
              Description is free text.

              Up to 10 bytes.
            maxLength: 10
            type: string
          items:
            items:
              description: An item of the list.
              type: string
            type: array
        type: object
    served: true
    storage: true
`

// TestRewrite joins every description of a CRD and changes nothing else; a second run, and a
// run over the checked-in CRDs (make manifests ran it), change nothing.
func TestRewrite(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(tmp, []byte(rawCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		if err := rewrite(tmp); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != joinedCRD {
			t.Fatalf("run %d wrote:\n%s\nwant:\n%s", run, got, joinedCRD)
		}
	}

	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) != 2 {
		t.Fatalf("config/crd/bases: %v %v, want the 2 CRDs", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(t.TempDir(), filepath.Base(f))
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := rewrite(tmp); err != nil {
			t.Fatal(err)
		}
		again, err := os.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(data) {
			t.Errorf("%s: crddoc changes the checked-in file: run make manifests", f)
		}
	}
}

func TestRewriteErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	notCRD := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(notCRD, []byte("kind: Pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		notCRD:                             notCRD + ": kind Pod, want CustomResourceDefinition",
		filepath.Join(dir, "missing.yaml"): "reading " + filepath.Join(dir, "missing.yaml") + ": open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory",
	} {
		if err := rewrite(file); err == nil || err.Error() != want {
			t.Errorf("rewrite(%s) = %v, want %q", file, err, want)
		}
	}
	if err := rewrite(bad); err == nil || len(err.Error()) < len("parsing "+bad) || err.Error()[:len("parsing "+bad)] != "parsing "+bad {
		t.Errorf("rewrite(%s) = %v, want an error starting %q", bad, err, "parsing "+bad)
	}
}
