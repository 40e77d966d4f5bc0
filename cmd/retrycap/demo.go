package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/retrycap/retrycap/internal/cli"
	"github.com/retrycap/retrycap/internal/demo"
	"github.com/retrycap/retrycap/internal/storm"
)

// ExitInterrupted is demo's exit status when Ctrl-C stops it mid-story: a shell's for a command
// ended by SIGINT, not 2, which says the demo could not run.
const ExitInterrupted = 130

// newDemoCmd returns `demo`: the story on an embedded control plane.
func newDemoCmd(_ io.Reader, stdout, _ io.Writer) *cobra.Command {
	var o demo.Options
	var exit bool
	chart := "storm.svg"
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole story on an embedded control plane (real kube-apiserver and etcd)",
		Long: "demo starts a real kube-apiserver and etcd (built from source on first use and cached in " +
			"~/.cache/retrycap), runs the retrycap manager with its webhooks, applies the samples and shows " +
			"what retrycap computes and enforces. It keeps the control plane up until Ctrl-C so you can use kubectl.\n\n" +
			"Run it in a checkout of the retrycap repository (make demo does): it reads the CRDs, the webhook " +
			"configuration and the samples from it, and builds the binaries with its hack/kube-bins.sh " +
			"(KUBEBUILDER_ASSETS, when set to a directory holding them, is used instead).\n\n" +
			"Exit status: 0 when the story ran to its end (and, without --exit, Ctrl-C stopped it; the storm " +
			"lab's targets are reported in its summary, not here), 130 when Ctrl-C (or SIGTERM) stopped it before " +
			"its end, 2 when it could not run or a chapter failed " +
			"(not in a checkout, a --chart that cannot be written, a control plane that did not start, an " +
			"over-cap deploy admitted). The control plane and every process the demo started are stopped either way.",
		Example: "  make demo                                          # builds bin/retrycap, runs it with --chart bin/storm.svg\n" +
			"  bin/retrycap demo --exit --chart \"\"                 # the story once, no chart (CI)\n" +
			"  bin/retrycap demo -v                               # with the manager's logs",
		Args: cli.NoArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			o.Out = stdout
			o.Wait = !exit
			o.Command = os.Args[0]
			if chart != "" {
				abs, err := filepath.Abs(chart)
				if err != nil {
					return fmt.Errorf("--chart %q: %w", chart, err)
				}
				o.ChartPath = abs
				// Checked before the control plane starts, not at the storm chapter.
				if err := storm.CheckChartPath(abs); err != nil {
					return &cli.ExitError{Code: cli.ExitBadInput, Msg: "demo: --chart: " + err.Error()}
				}
			}
			err := demo.Run(ctx, o)
			var intr *demo.Interrupted
			if errors.As(err, &intr) {
				return &cli.ExitError{Code: ExitInterrupted, Msg: "demo: " + err.Error()}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&exit, "exit", false, "stop after the story instead of waiting for Ctrl-C (for CI)")
	cmd.Flags().StringVar(&chart, "chart", chart, "the storm lab's SVG chart of requests/s at payment; empty for none")
	cmd.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "show the manager's logs")
	return cmd
}
