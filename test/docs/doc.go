// Package docs checks the documentation against the repository, so that what a new user reads is
// what the code does: every relative link and #anchor in README.md and the docs resolves, and
// every section the docs and the Go sources cite by a page and a quoted title is a heading or a
// bold lead-in of that page; the
// layout of docs/development.md names every package there is (and none that is gone); the "Who
// calls whom" table of docs/architecture.md has one row per package with exactly the imports the
// code has (go list), and a package it marks pure links no Kubernetes client; docs/api.md has a
// row for every field of the RetryPolicy CRD's spec and status and none it lacks; every flag the
// docs pass to `retrycap analyze|graph|observe|discover|storm|demo` is one of the command's
// (storm's and demo's read from cmd/retrycap's source), and a value they give -o, --outage,
// --protocol or --dialect is one the flag's usage names; docs/operating.md's Flags table has a
// row for every flag of the manager and docs/proxy.md's Command line every flag of the proxy, and
// neither names one that is not; every `make X` they name is a target; a code block that shows
// `$ retrycap analyze|observe ...` with its output shows what the command prints (run in process) and
// the exit status its "# exit N" says; docs/helm.md's Values table names every value of the
// chart's values.yaml and none it lacks, and values.schema.json names none it lacks; README.md's
// Documentation table links every page of docs/; docs/annotations.md names every retrycap.dev/
// annotation and label retrycap reads or writes; every flag of the CLI's commands is named in
// the docs, storm's in docs/storm-lab.md's Flags table; every package comment names only Go
// files, repository paths, pkg.Name, Type.Name and command-line flags that exist, and every
// pkg.Name in a code span of README.md and the reference pages in docs/ is declared;
// docs/architecture.md's picture names every admission webhook (and the pages that count them
// count right); the `hack/` row of docs/development.md's layout names everything under hack/,
// and a package it calls pure links no Kubernetes client; each message docs/troubleshooting.md
// quotes as `helm install`'s refusal is one the chart's templates fail with; and README.md and
// docs/development.md give make demo's status after Ctrl-C as GNU make ends (by SIGINT, 130).
// It has no non-test code and needs only the go command.
package docs
