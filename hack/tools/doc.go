// Package tools pins the developer tools that must not share the product's module graph
// (golangci-lint pulls in hundreds of modules that would otherwise move the product's versions).
// Run them with `go tool -modfile=hack/tools/go.mod <tool>` from the repository root.
package tools
