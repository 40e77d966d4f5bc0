// Command crddoc rewrites the descriptions of the CRDs controller-gen writes so that
// `kubectl explain` reads them as it reads Kubernetes' own types.
//
// controller-gen keeps the line breaks of the Go comments, and kubectl explain prints each of
// them, so every description broke mid-sentence at column 100. Kubernetes' generators
// (fmtRawDoc in apimachinery's runtime package) join the lines of a
// paragraph with a space, keep a blank line as a paragraph break, and keep an indented line (an
// example, a code block) on a line of its own; crddoc does the same, and also keeps a line that
// starts a list item ("- ", "* ") on its own. `make manifests` runs it after controller-gen, so
// `make verify-generated` covers it.
//
// Usage: go run ./hack/crddoc FILE...  (rewrites each file in place; a file it cannot read or
// parse is an error naming it, and no file is half written).
package main
