// Package docs checks the documentation against the repository, so that what a new user reads is
// what the code does: every relative link and #anchor in README.md and the docs resolves; the
// layout of docs/development.md names every package there is (and none that is gone); the "Who
// calls whom" table of docs/architecture.md has one row per package with exactly the imports the
// code has, and a package it marks pure links no Kubernetes client; the commands the README's
// quickstart names are make targets. It has no non-test code and needs only the go command.
package docs
