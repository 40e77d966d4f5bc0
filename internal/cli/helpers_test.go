package cli

import "io"

// execute runs the shared commands under one root, as both binaries do.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRoot(stdin, stdout, stderr)
	root.AddCommand(NewAnalyzeCmd(stdin, stdout, stderr), NewGraphCmd(stdin, stdout, stderr), NewObserveCmd(stdin, stdout, stderr), NewDiscoverCmd(stdin, stdout, stderr))
	return Execute(root, args)
}
