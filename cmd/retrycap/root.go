package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes shared by the subcommands.
const (
	ExitOK       = 0
	ExitOverCap  = 1 // a policy is over its cap or has a retry cycle
	ExitBadInput = 2 // unreadable or malformed input, bad flags
)

// exitError carries an exit code out of a subcommand; its message (if any) was already printed
// or is printed by Execute.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// subcommands are added by each subcommand's file in its init function, so that files can be
// added without touching this one.
var subcommands []func(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "retrycap",
		Short:         "Cap retry multiplication along every call chain",
		Long:          "retrycap computes how retries multiply along call chains and enforces one cap per chain.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Installed as kubectl-retrycap, help says "kubectl retrycap ..." (see graph.go).
	applyInvocationName(root, os.Args[0])
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, sub := range subcommands {
		root.AddCommand(sub(stdin, stdout, stderr))
	}
	return root
}

// Execute runs the CLI with args and returns the process exit code.
func Execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "retrycap:", ee.msg)
		}
		return ee.code
	}
	// Flag and argument errors from cobra.
	fmt.Fprintln(stderr, "retrycap:", err)
	return ExitBadInput
}
