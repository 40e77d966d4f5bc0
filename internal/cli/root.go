package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/retrycap/retrycap/internal/annotations"
)

// Exit codes shared by the subcommands.
const (
	ExitOK       = 0
	ExitOverCap  = 1 // a policy is over its cap or has a retry cycle
	ExitBadInput = 2 // unreadable or malformed input, bad flags
)

// ExitError carries an exit code out of a subcommand; its message (if any) is printed by
// Execute.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// NewRoot returns the root command without subcommands, wired to the given streams; the
// binaries add theirs.
func NewRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "retrycap",
		Short:         "Cap retry multiplication along every call chain",
		Long:          "retrycap computes how retries multiply along call chains and enforces one cap per chain.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Installed as kubectl-retrycap, help says "kubectl retrycap ...".
	applyInvocationName(root, os.Args[0])
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root
}

// KubectlPluginName is the name of the kubectl plugin binary, so that kubectl finds it as the
// plugin `kubectl retrycap`.
const KubectlPluginName = "kubectl-retrycap"

// applyInvocationName makes help and usage say "kubectl retrycap ..." when the binary runs as
// kubectl-retrycap (kubectl execs plugins by that file name), and "retrycap ..." otherwise.
func applyInvocationName(root *cobra.Command, argv0 string) {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") != KubectlPluginName {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl retrycap"
}

// exampleCall is a command line of an Example: "retrycap CMD" or "kubectl retrycap CMD".
var exampleCall = regexp.MustCompile(`(^|[\s|])(kubectl )?retrycap (analyze|graph|observe|discover|storm|demo)\b`)

// nameExamples writes every subcommand's examples with the name the binary was run as: the
// plugin's help showed "retrycap analyze -f deploy/", a command its users do not have (and the
// full CLI's "kubectl retrycap graph", one it does not need).
func nameExamples(root *cobra.Command) {
	name := "retrycap"
	if root.Annotations[cobra.CommandDisplayNameAnnotation] != "" {
		name = root.Annotations[cobra.CommandDisplayNameAnnotation]
	}
	for _, c := range root.Commands() {
		c.Example = exampleCall.ReplaceAllString(c.Example, "${1}"+name+" ${3}")
	}
}

// isTerminal reports whether r is a terminal (a command's stdin typed at, not piped into).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// Execute runs root with args and returns the process exit code; errors go to root's stderr.
func Execute(root *cobra.Command, args []string) int {
	stderr := root.ErrOrStderr()
	nameExamples(root)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			fmt.Fprintln(stderr, "retrycap:", ee.Msg)
		}
		return ee.Code
	}
	// Flag and argument errors from cobra.
	fmt.Fprintln(stderr, "retrycap:", err)
	return ExitBadInput
}

// noArgs is cobra.NoArgs with a message that names the argument and says how the command takes
// its input (cobra's reads "unknown command "x.yaml" for "retrycap analyze"").
func noArgs(how string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("%s: unexpected argument %q: %s", cmd.Name(), args[0], strings.ReplaceAll(how, "ARG", args[0]))}
	}
}

// NoArgs is noArgs for the full CLI's own commands (storm, demo): flags only.
func NoArgs() cobra.PositionalArgs { return noArgs("it takes flags only (--help lists them)") }

// checkNamespace refuses a -n value that cannot name a namespace: offline it would stand for
// the objects' namespace, against a cluster the answer would be "nothing there".
func checkNamespace(command, ns string) error {
	if reason := annotations.ValidateLabel(ns); reason != "" {
		return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("%s: -n %q: not a namespace name (a DNS-1123 label): %s", command, ns, reason)}
	}
	return nil
}

// checkWorkloadRef checks a NAME or NAMESPACE/NAME flag value (discover --gateway): a namespace
// label and a workload name (a DNS-1123 subdomain); anything else would never match a caller.
func checkWorkloadRef(s string) bool {
	ns, name, scoped := strings.Cut(s, "/")
	if !scoped {
		name = ns
	} else if annotations.ValidateLabel(ns) != "" {
		return false
	}
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// stdinOnce refuses "-" given twice: the second read found stdin empty, without a word. how is
// how the command names it ("-f -" or "-").
func stdinOnce(command, how string, files []string) error {
	if i := slices.Index(files, "-"); i >= 0 && slices.Contains(files[i+1:], "-") {
		return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("%s: %s (stdin) given twice: it is read once", command, how)}
	}
	return nil
}

// loadKubeconfig finds the cluster as kubectl does (explicit path, else $KUBECONFIG, else
// ~/.kube/config, else in-cluster). client-go passes over a $KUBECONFIG file that does not
// exist and then says only "no configuration has been provided": the files it looked for are
// named.
func loadKubeconfig(explicit, context string) (clientcmd.ClientConfig, *rest.Config, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = explicit
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			var looked []string
			for _, p := range loading.Precedence {
				if _, serr := os.Stat(p); serr != nil {
					looked = append(looked, p+" (none)")
				} else {
					looked = append(looked, p+" (no cluster in it)")
				}
			}
			if len(looked) == 0 {
				looked = []string{"none: $KUBECONFIG is empty and there is no home directory"}
			}
			return nil, nil, fmt.Errorf("loading the kubeconfig: no cluster found: looked at %s, and not running in a pod; give --kubeconfig or set KUBECONFIG", strings.Join(looked, ", "))
		}
		// The flag the user typed is named with its value: client-go's own words name neither
		// ("stat /x: no such file", "context \"x\" does not exist").
		if explicit != "" {
			if _, serr := os.Stat(explicit); serr != nil {
				var pe *fs.PathError
				if errors.As(serr, &pe) {
					serr = pe.Err
				}
				return nil, nil, fmt.Errorf("loading the kubeconfig: --kubeconfig %q: %w", explicit, serr)
			}
		}
		if context != "" {
			if raw, rerr := cc.RawConfig(); rerr == nil {
				if _, ok := raw.Contexts[context]; !ok {
					names := "none"
					if len(raw.Contexts) > 0 {
						names = strings.Join(slices.Sorted(maps.Keys(raw.Contexts)), ", ")
					}
					return nil, nil, fmt.Errorf("loading the kubeconfig: --context %q: not in the kubeconfig (its contexts: %s)", context, names)
				}
			}
		}
		if explicit != "" {
			return nil, nil, fmt.Errorf("loading the kubeconfig: --kubeconfig %q: %w", explicit, err)
		}
		return nil, nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cc, cfg, nil
}
